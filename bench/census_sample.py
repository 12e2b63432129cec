"""Print a reproducible sample of census cells (16 with a first break, 4 clean; seed 14) with each
chain hop checked against the source line it names, for reading by hand.

    python bench/census_sample.py reports/census-sglang-0.5.9.json
    python bench/census_sample.py reports/census-sglang-0.5.10.json
"""
import json, random, sys
from pathlib import Path
d=json.load(open(sys.argv[1]))
# the census's own targets, unpacked in the wheel cache: sglang==0.5.10 -> trees/sglang-0.5.10
roots=[Path.home()/".cache/dynacheck/trees"/t.replace("==","-").replace("flashinfer-python","flashinfer_python") for t in d["targets"]]
def src(f,l):
    for r in roots:
        p=r/f
        if p.exists(): return p.read_text().splitlines()[l-1].strip()
    return None
rng=random.Random(14)
broken=[c for c in d['cells'] if c['first_break']]
clean=[c for c in d['cells'] if not c['fatal_sites']]
sample=rng.sample(broken,16)+rng.sample(clean,4)
for c in sample:
    fb=c['first_break']
    print("==",c['model'],c['deployment'],c['fatal_sites'],c['fix'] and c['fix']['at'])
    if not fb: print("  clean; entry", c['entry']); continue
    for h in fb['chain']:
        s=src(h['file'],h['line']); ok = s is not None and h['code'].split('(')[0].strip()[:25] in s
        print("  ", "ok" if ok else "??", h['file'],h['line'], h['code'][:60])
    print("   site", fb['gb_id'], fb['rule'], fb['file'], fb['line'], "|", src(fb['file'],fb['line']))
