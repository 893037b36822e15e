"""hidet's logs (hidet/utils/logs.py): silent by default, components switched on by HIDET_LOGS or set_logs."""
import logging
import subprocess
import sys

import pytest

from hidet.utils import logs

BUILD = ('import hidet\n'
         'x = hidet.symbol([4, 8])\n'
         'y = hidet.ops.layer_norm(hidet.ops.relu(x) * 2.0, 8)\n'
         'hidet.graph.optimize(hidet.trace_from(y, [x])).build()\n')


def _stderr(env_logs):
    import os

    env = {k: v for k, v in os.environ.items() if k != 'HIDET_LOGS'}
    if env_logs is not None:
        env['HIDET_LOGS'] = env_logs
    run = subprocess.run([sys.executable, '-c', BUILD], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    return run.stderr


def test_silent_by_default():
    assert '[hidet.' not in _stderr(None)


def test_every_component_at_the_most_detailed_level():
    err = _stderr('+all')
    for line in ('[hidet.graph] optimizing a graph of', '[hidet.graph] fuse_operators:', '[hidet.graph] after ',
                 '[hidet.fusion] ', '[hidet.build] ', 'auto-scheduler',
                 'tasks built in', 'compile', '[hidet.cache] '):
        assert line in err, (line, err[-3000:])


def test_spec_levels_and_errors():
    saved = {name: logs.logger(name).level for name in logs.COMPONENTS}
    try:
        logs.set_logs('graph,+fusion,-cache')
        assert logs.logger('graph').level == logging.INFO and logs.logger('fusion').level == logging.DEBUG
        assert logs.logger('cache').level == logging.WARNING
        logs.set_logs('+all')
        assert all(logs.logger(name).level == logging.DEBUG for name in logs.COMPONENTS)
        handlers = logging.getLogger('hidet').handlers
        assert sum(1 for h in handlers if getattr(h, '_hidet_logs', False)) == 1  # one handler, however often set
        with pytest.raises(ValueError, match='unknown component'):
            logs.set_logs('fusoin')
        logs.set_logs('')  # nothing to change
    finally:
        for name, level in saved.items():
            logs.logger(name).setLevel(level)


def test_stage_times():
    times = logs.StageTimes()
    with times.stage('a'):
        pass
    with times.stage('a'):
        pass
    assert list(times.seconds) == ['a'] and times.text().endswith('s') and 'a ' in times.text()
