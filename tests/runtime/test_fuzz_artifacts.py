"""The artifact fuzz test (issue 25): mutated CPU artifacts are loaded and run in child processes through
Python and through C++ (run_model), and none may crash, hang or raise a raw Python exception. See
fuzz_artifacts.py for the mutation kinds and outcomes.

CI runs a short run (HIDET_FUZZ_CASES, default 96: 8 of each kind); the long one on demand:
    HIDET_FUZZ_CASES=10000 PYTHONPATH=/tmp/dev python -m pytest tests/runtime/test_fuzz_artifacts.py -s
(or the script itself, which keeps the artifacts of findings: python tests/runtime/fuzz_artifacts.py -h).
Every kind is asserted, the kernel-contract kinds that change what a kernel is given
included: the loader checks each instruction against its kernel's declared signature."""
import json
import os
import subprocess
import sys


HERE = os.path.dirname(os.path.abspath(__file__))


def test_mutated_artifacts_never_crash(examples_build, tmp_path):
    cases = int(os.environ.get('HIDET_FUZZ_CASES', '96'))
    out = tmp_path / 'fuzz.json'
    cmd = [sys.executable, os.path.join(HERE, 'fuzz_artifacts.py'), '--cases', str(cases), '--seeds-dir',
           str(tmp_path / 'seeds'), '--run-model', os.path.join(examples_build, 'run_model'), '--json', str(out),
           '--keep', str(tmp_path / 'findings')]
    (tmp_path / 'seeds').mkdir()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600 + 2 * cases)
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stdout)
    result = json.loads(out.read_text())
    for side in ('python', 'cpp'):
        ran = sum(sum(c.values()) for c in result['counts'][side].values())
        assert ran == cases, (side, ran)
    bugs = result['findings']
    assert not bugs, '\n'.join(f"[{f['side']}] case {f['case']} {f['kind']} {f['artifact']}: {f['status']}: "
                               f"{f['message'][:300]} ({f['mutation']})" for f in bugs)
