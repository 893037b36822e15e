"""scripts/compare_picks.py on the CPU: the level-0 picks of every shape it compares (an H100's), and the comparison
of two pick lists (what the GPU then times: here none differs)."""
import importlib.util
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _script():
    spec = importlib.util.spec_from_file_location('compare_picks', os.path.join(ROOT, 'scripts', 'compare_picks.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_picks_of_every_shape_and_an_unchanged_comparison(tmp_path, capsys):
    script = _script()
    out = str(tmp_path / 'picks.json')
    script.main(['picks', out])
    picks = json.load(open(out))
    assert list(picks) == script.shapes() and len(picks) > 200
    name = re.compile(r'\d+x\d+x\d+_w\d+x\d+_p\d+(_s\d+)?(_wg)?(_tma)?')
    assert all(name.fullmatch(p) for p in picks.values()), [p for p in picks.values() if not name.fullmatch(p)]
    assert picks['4096x3072x768'] == '128x256x64_w64x256_p4_wg_tma'  # (the large tiles)
    assert picks['1576x768x3072'] == '64x256x64_w64x256_p4_wg_tma'
    assert picks['conv:32x64x56x56x256x1x1'] == '64x128x64_w64x128_p3_wg_tma'  # (epilogue-bound)
    script.main(['time', out, out])  # nothing changed: nothing to time (no GPU needed)
    assert f'0 of {len(picks)} shapes changed their pick' in capsys.readouterr().out
