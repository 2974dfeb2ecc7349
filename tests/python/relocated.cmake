# Copies the built package to WORK and imports it from there with `python3 -I` (no PYTHONPATH, no
# user site): cora, its extension module and cora.torch's kernel libraries must all come along.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(COPY ${PACKAGE} DESTINATION ${WORK})
execute_process(
  COMMAND ${PYTHON} -I -c "import sys; sys.path.insert(0, '${WORK}'); import cora, cora.torch, torch
assert cora.__file__.startswith('${WORK}'), cora.__file__
m = cora.torch.TransformerEncoder(torch.nn.TransformerEncoderLayer(64, 1, 64).eval())
out = m(torch.ones(3, 64), torch.tensor([0, 1, 3]))
assert out.shape == (3, 64) and bool(torch.isfinite(out).all())
print('relocated package: encoder OK')"
  WORKING_DIRECTORY ${WORK}
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the relocated package failed (status ${status})")
endif()
