"""scripts/sass-mix.py: the instruction classes counted from a crafted cuobjdump listing, the
records read from a crafted kernel cache, the --require checks (met, failed, kernel absent), and
bad arguments refused with exit status 2. cuobjdump itself is faked (a script on PATH that prints the
listing), so this runs on any machine; on a GPU machine gpu-check.sh runs the real one."""
import importlib.util
import os
import stat
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "sass-mix.py")
spec = importlib.util.spec_from_file_location("sass_mix", SCRIPT)
sass_mix = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sass_mix)

LISTING = """
	code for sm_90
		Function : cora_vgemm_gpu_k0_i32
	.headerflags	@"EF_CUDA_SM90"
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   IMAD.WIDE R2, R3, 0x4, R4 ;
        /*0020*/              @!P0 LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0030*/                   STS.128 [R9], R4 ;
        /*0040*/                   LDS.128 R8, [R9] ;
        /*0050*/                   FFMA R1, R2, R3, R1 ;
        /*0060*/                   FFMA R5, R2, R3, R5 ;
		Function : cora_vgemm_gpu_k0
        /*0000*/                   IADD3.X R5, R6, R7, RZ, P0, !PT ;
        /*0010*/                   ISETP.GE.U32.AND.EX P0, PT, R1, R2, PT, P1 ;
        /*0020*/                   LDG.E R4, desc[UR4][R2.64] ;
        /*0030*/                   LDS R8, [R9] ;
        /*0040*/                   FFMA R1, R2, R3, R1 ;
"""


def test_mix_counts_the_instruction_classes():
    m = sass_mix.mix(LISTING)
    narrow, wide = m["cora_vgemm_gpu_k0_i32"], m["cora_vgemm_gpu_k0"]
    assert narrow["instructions"] == 7
    assert (narrow["FFMA"], narrow["LDG"], narrow["LDG.128"], narrow["LDS"], narrow["LDS.128"]) == (2, 1, 1, 1, 1)
    assert narrow["int64"] == 1  # IMAD.WIDE
    assert wide["int64"] == 2  # IADD3.X, ISETP ... .EX
    assert (wide["LDG"], wide["LDG.128"], wide["LDS.128"]) == (1, 0, 0)


def test_cubin_of_reads_the_record_framing():
    record = sass_mix.TAG + b"5\ncubin3\nptx0\n"
    assert sass_mix.cubin_of(record) == b"cubin"
    assert sass_mix.cubin_of(b"something else") is None


def test_requirements_met_failed_and_absent():
    rows = {(name, "sm_90", "abcd0123"): c for name, c in sass_mix.mix(LISTING).items()}
    need = [sass_mix.parse_requirement("cora_vgemm_gpu_k0_i32:LDG.128>0"),
            sass_mix.parse_requirement("k0_i32:int64<2"),
            sass_mix.parse_requirement("cora_vgemm_gpu_k0:FFMA=1")]
    assert sass_mix.failures(rows, need) == []
    bad = sass_mix.failures(rows, [sass_mix.parse_requirement("cora_vgemm_gpu_k0:LDG.128>0"),
                                   sass_mix.parse_requirement("cora_trmm_gpu_k0:FFMA>0")])
    assert bad == ["cora_vgemm_gpu_k0 (sm_90, record abcd0123): LDG.128 is 0, expected > 0",
                   "no kernel named ...cora_trmm_gpu_k0 in the cache"]
    for text in ["k0", "k0:FFMA", "k0:FFMA>x", "k0 FFMA>1"]:
        try:
            sass_mix.parse_requirement(text)
            assert False, text
        except ValueError as e:
            assert "--require takes KERNEL:COLUMN>N" in str(e)


def run(args, tmp_path, listing=LISTING):
    """sass-mix.py with a fake cuobjdump (printing `listing`) first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "cuobjdump"
    fake.write_text("#!/bin/sh\ncat <<'EOF'\n" + listing + "\nEOF\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ.get('PATH', '')}")
    return subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True, env=env)


def test_the_command_reads_a_cache_and_checks_requirements(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "k0123456789abcdef.bin").write_bytes(sass_mix.TAG + b"5\ncubin3\nptx0\n")
    (cache / "k0123456789abcdef.so").write_bytes(b"not a record")
    ok = run([str(cache), "cora_vgemm", "--require", "cora_vgemm_gpu_k0_i32:LDG.128>0"], tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "| cora_vgemm_gpu_k0_i32 | sm_90 | 01234567 | 7 | 2 |" in ok.stdout
    failed = run([str(cache), "--require", "cora_vgemm_gpu_k0:int64<1"], tmp_path)
    assert failed.returncode == 1
    assert "sass-mix: FAILED: cora_vgemm_gpu_k0 (sm_90, record 01234567): int64 is 2, expected < 1" in failed.stdout


def test_bad_arguments_exit_2(tmp_path):
    for args, message in [([], "usage: sass-mix.py"),
                          (["--bogus"], "unknown option '--bogus'"),
                          ([str(tmp_path / "missing")], "no kernel cache at"),
                          ([str(tmp_path), "--require", "k0"], "--require takes KERNEL:COLUMN>N")]:
        r = run(args, tmp_path)
        assert r.returncode == 2, args
        assert message in r.stderr, (args, r.stderr)
