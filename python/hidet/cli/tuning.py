"""``hidet cache tuning``: for each task that tuning stored in the cache, how far its template's default config
(what search level 0 runs, the first candidate of every space) is from the best candidate found, from the
latencies the tuning measured on the same inputs; so one max-autotune compile of a model shows, layer by layer,
whether its default configurations are within reach of tuning (the issues' bar: 1.15x)."""
from __future__ import annotations

import math
from typing import List, Optional

BOUND = 1.15  # default over best, at most


def _config_text(config) -> str:
    if isinstance(config, dict):
        return ' '.join(f'{k}={v}' for k, v in config.items() if v not in (None, False))
    return str(config)


def report(records: List[dict], level: Optional[int] = None, since: Optional[str] = None,
           bound: float = BOUND) -> str:
    """The table of ``records`` (stored tuning results, ``hidet.backend.cache.tuning_records``) at search level
    ``level`` stored at or after ``since`` (``YYYY-MM-DD HH:MM:SS``, as the records keep their time): worst
    default first, with a summary line."""
    from tabulate import tabulate

    rows = []
    for r in records:
        candidates = r.get('candidates') or []
        if level is not None and r.get('level') != level or since and str(r.get('time', '')) < since or \
                len(candidates) < 2:
            continue
        default, best = candidates[0].get('latency_ms'), r.get('latency_ms')
        if not best:
            continue
        ratio = default / best if default else math.inf  # (None: the default could not run)
        rows.append((ratio, r, default))
    if not rows:
        return 'no tuned tasks in the cache' + (f' at level {level}' if level is not None else '') + \
            (f' since {since}' if since else '')
    rows.sort(key=lambda row: -row[0])
    table = [[r.get('title', r.get('task')), r.get('level'), len(r['candidates']),
              f'{default * 1e3:.1f}' if default else 'failed', f'{r["latency_ms"] * 1e3:.1f}',
              'inf' if math.isinf(ratio) else f'{ratio:.2f}x', _config_text(r.get('config')),
              _config_text(r['candidates'][0].get('config'))]
             for ratio, r, default in rows]
    text = tabulate(table, headers=['task', 'level', 'candidates', 'default µs', 'best µs', 'default / best',
                                    'best config', 'default config'])
    within = sum(ratio <= bound for ratio, _, _ in rows)
    finite = [ratio for ratio, _, _ in rows if not math.isinf(ratio)]
    mean = math.exp(sum(math.log(x) for x in finite) / len(finite)) if finite else math.inf  # (of those that ran)
    worst, worst_record, _ = rows[0]
    summary = (f'{len(rows)} tuned task(s): the default within {bound}x of the best on {within} '
               f'({within / len(rows):.0%}); geometric mean {mean:.3f}x; worst '
               f'{"a default that failed to run" if math.isinf(worst) else f"{worst:.2f}x"} '
               f'({worst_record.get("title", worst_record.get("task"))})')
    return text + '\n' + summary
