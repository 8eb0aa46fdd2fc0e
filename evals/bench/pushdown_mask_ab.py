"""Pushdown back-end mask A/B (issue 14): this working tree against ``main``'s
``decoding/backends/pushdown`` (:func:`evals.bench.compile_ab.load_baseline`), in ONE process:
``Compiler(vocab, cache=False, backend="pushdown")`` compiles each grammar fresh (best of the
repetitions, alternating which goes first), then the first mask, then the same random token
walks (made once from this tree's grammar) replayed cold (masks computed) and warm; thread time.

    PYTHONPATH=. .venv/bin/python -m evals.bench.pushdown_mask_ab [WALKS [CASES [REPS]]]

CASES: comma-separated among "free depth16", hibernate, kb_192, kb_208, sp_137 (default all).
"""
import sys, json, time, gc, importlib
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import numpy as np
from evals.bench import compile_ab as CA
CA.load_baseline('main', ('decoding/backends/pushdown',))
from decoding.vocab import Vocab
from decoding.compiler import Compiler
from decoding.testing import random_walk
from decoding.frontends.jsonschema import compile_schema
from decoding.frontends.xml.dtd import parse_dtd
from decoding.frontends.xml.grammar import dtd_grammar
from decoding.backends.tables import prepare
B = lambda m: importlib.import_module(CA.BASE + '.' + m)
VP = str(CA.VOCAB)
NV, BV = Vocab.from_gguf(VP), B('vocab').Vocab.from_gguf(VP)
prepare(NV); B('backends.tables').prepare(BV)
NC, BC = Compiler(NV, cache=False, backend='pushdown'), B('compiler').Compiler(BV, cache=False, backend='pushdown')
SH = CA.SHARED
FREE = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6}, "meta": {},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3}}, "required": ["name", "meta"]}
def kb(n, sp='Kubernetes'): return json.loads((SH / 'jsonschemabench' / sp / f'{n}_Normalized.json').read_text())['schema']
cases = {
  'free depth16': lambda C, m: C.compile_ir(m('frontends.jsonschema').compile_schema(FREE, free_depth=16).grammar),
  'hibernate': lambda C, m: C.compile_ir(m('frontends.xml.grammar').dtd_grammar(m('frontends.xml.dtd').parse_dtd((SH / 'dtd' / 'hibernate-mapping-3.0.dtd').read_text()), 'hibernate-mapping', max_depth=2)),
  'kb_192': lambda C, m: C.compile_json_schema(kb('kb_192')),
  'kb_208': lambda C, m: C.compile_json_schema(kb('kb_208')),
  'sp_137': lambda C, m: C.compile_json_schema(kb('sp_137', 'Snowplow')),
}
nm = lambda s: importlib.import_module('decoding.' + s)
bm = B
WALKS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
def replay(cg, walks):
    n = 0; t0 = time.thread_time(); firsts = []
    for toks in walks:
        s = 0
        for t in toks:
            t1 = time.thread_time()
            cg.mask(s)
            s = cg.next_state(s, t)
            if s < 0 and s != -2: raise AssertionError('refused')
            n += 1
    return (time.thread_time() - t0) / max(n, 1)
SEL = sys.argv[2].split(",") if len(sys.argv) > 2 else list(cases)
for name, mk in [(k, cases[k]) for k in SEL]:
    ref = mk(NC, nm)
    rng = np.random.default_rng(0)
    budget = ref.completion_cost(0) + 300
    walks = [random_walk(ref, rng, budget=budget, max_steps=budget + 1).tokens for _ in range(WALKS)]
    res = {'new': [], 'base': []}
    for rep in range(int(sys.argv[3]) if len(sys.argv) > 3 else 3):
        for k in (('new', 'base') if rep % 2 == 0 else ('base', 'new')):
            C, m = (NC, nm) if k == 'new' else (BC, bm)
            gc.collect()
            t0 = time.thread_time(); cg = mk(C, m); c = time.thread_time() - t0
            t1 = time.thread_time(); cg.mask(0); first = time.thread_time() - t1
            cold = replay(cg, walks); warm = replay(cg, walks)
            res[k].append((c, first, cold, warm))
    out = []
    for k in ('base', 'new'):
        r = np.array(res[k]).min(axis=0)
        out.append(r)
        print('%-13s %-4s compile %6.1f ms  first mask %6.2f ms  cold %6.1f us/tok  warm %5.1f us/tok' % (name, k, r[0]*1e3, r[1]*1e3, r[2]*1e6, r[3]*1e6))
    print('%-13s new/base compile %.2f first %.2f cold %.2f warm %.2f' % (name, *(out[1] / out[0])))
