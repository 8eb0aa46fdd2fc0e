"""Pushdown back-end compile A/B (issue 14): ``compile_grammar_pushdown(grammar, vocab,
size_checked=True)`` (the back-end alone, after the front-end and ``check_size``) of this
working tree against a baseline whose ``decoding/backends/pushdown`` is that of a commit
(:func:`evals.bench.compile_ab.load_baseline`), in ONE process, interleaved, thread time after
``gc.collect()``, best of ``--reps`` per grammar; reports the outcome (states, rules) of each
and counts those that differ.

    PYTHONPATH=. .venv/bin/python -m evals.bench.pushdown_compile_ab [--baseline main] [--reps=5]
        kb_192 kb_208 sp_137 split:Kubernetes:60

A name is a jsonschemabench schema (kb_* Kubernetes, sp_* Snowplow, else Glaiveai2K);
``split:NAME:N`` is N schemas of that split (:func:`evals.bench.maskbench.select_schemas`),
every one forced to the pushdown back-end.
"""
import sys, json, time, gc, importlib
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from evals.bench import compile_ab as CA
_bl = next((a.split('=', 1)[1] for a in sys.argv[1:] if a.startswith('--baseline=')), 'main')
base = CA.load_baseline(_bl, ('decoding/backends/pushdown',))
import decoding
from decoding.compiler import Compiler
from decoding.vocab import Vocab
from decoding.ir.size import check_size
from decoding.limits import DEFAULT_LIMITS
from decoding.backends.pushdown.index import compile_grammar_pushdown as new_cgp
bv = importlib.import_module(CA.BASE + '.vocab'); bc = importlib.import_module(CA.BASE + '.compiler')
bsz = importlib.import_module(CA.BASE + '.ir.size'); blim = importlib.import_module(CA.BASE + '.limits')
base_cgp = importlib.import_module(CA.BASE + '.backends.pushdown.index').compile_grammar_pushdown
VP = str(CA.VOCAB)
NV, BV = Vocab.from_gguf(VP), bv.Vocab.from_gguf(VP)
NC, BC = Compiler(NV, cache=False), bc.Compiler(BV, cache=False)
D = str(CA.SHARED / 'jsonschemabench') + '/'
items = []
args = sys.argv[1:]
reps = 5
for a in args:
    if a.startswith('--reps='): reps = int(a[7:]); continue
    if a.startswith('--baseline='): continue
    if a.startswith('split:'):
        sp, lim = a[6:].split(':')
        from evals.bench.maskbench import select_schemas
        files = [f.name.replace('_Normalized.json', '') for f in select_schemas(__import__('pathlib').Path(D + sp), int(lim))]
    else:
        files = [a]
    for n in files:
        sp = 'Kubernetes' if n.startswith('kb') else 'Snowplow' if n.startswith('sp') else 'Glaiveai2K'
        s = json.load(open(D + sp + '/' + n + '_Normalized.json'))['schema']
        try:
            gn = NC.prepare_source(s, 'json-schema').grammar; gb = BC.prepare_source(s, 'json-schema').grammar
            check_size(gn, DEFAULT_LIMITS, inline=False); bsz.check_size(gb, blim.DEFAULT_LIMITS, inline=False)
        except Exception as e:
            continue
        items.append((n, gn, gb))
def t(f, g, V):
    gc.collect()
    t0 = time.thread_time()
    try:
        r = f(g, V, size_checked=True); out = ('ok', r.pushdown.n_states, len(r.pushdown.dfas))
    except Exception as e:
        out = ('err', type(e).__name__, str(e))
    return time.thread_time() - t0, out
rows = []
diff = 0
for n, gn, gb in items:
    tn, tb = [], []
    for i in range(reps):
        if i % 2:
            a = t(new_cgp, gn, NV); b = t(base_cgp, gb, BV)
        else:
            b = t(base_cgp, gb, BV); a = t(new_cgp, gn, NV)
        tn.append(a[0]); tb.append(b[0])
    if a[1] != b[1]:
        diff += 1; print('DIFFERS', n, a[1], b[1])
    rows.append((n, min(tb), min(tn)))
    if len(items) <= 10: print('%-8s base %.1f ms new %.1f ms  x%.2f  %s' % (n, min(tb)*1e3, min(tn)*1e3, min(tb)/min(tn), a[1]))
def pct(xs, q): xs = sorted(xs); return xs[min(len(xs)-1, int(q*len(xs)))]
if len(items) > 10:
    for q in (0.5, 0.9, 0.99):
        b = pct([r[1] for r in rows], q); nn = pct([r[2] for r in rows], q)
        print('p%d base %.2f ms new %.2f ms ratio %.2f' % (q*100, b*1e3, nn*1e3, nn/b))
    print('sum base %.1f new %.1f' % (sum(r[1] for r in rows)*1e3, sum(r[2] for r in rows)*1e3))
print(len(items), 'items,', diff, 'differ')
