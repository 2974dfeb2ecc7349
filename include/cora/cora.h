/** \file The whole public API of cora. */
#pragma once

#include "cora/Backend.h"
#include "cora/Cuda.h"
#include "cora/Error.h"
#include "cora/Expr.h"
#include "cora/Generator.h"
#include "cora/KernelBatch.h"
#include "cora/Pipeline.h"
#include "cora/Reference.h"
#include "cora/Runtime.h"
#include "cora/Sparse.h"
#include "cora/Spatial.h"
#include "cora/SparsityPropagation.h"
#include "cora/Target.h"
#include "cora/Tensor.h"
#include "cora/Tune.h"
#include "cora/Type.h"
