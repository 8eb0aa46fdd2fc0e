/* The one thin CPython binding over the native core (native/include/gd_native.h).
 * No logic lives here: argument checking, buffer access, GIL release, error mapping.
 * The chosen kernel implementation lives in the module state (PEP 3121 / PEP 489
 * multi-phase init), not in a C global: the core itself is stateless. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

#include "gd_native.h"

#define TRIE_CAPSULE "decoding._native.trie"
#define LAZY_CAPSULE "decoding._native.lazy_dfa"

/* Per-module state: the kernel table every dispatched call uses (set by set_impl). */
typedef struct {
    const gd_kernels *kernels;
} native_state;

static native_state *state_of(PyObject *module) { return (native_state *)PyModule_GetState(module); }

/* format character of a native-endian buffer ('<', '=', '@' prefixes allowed), or 0 */
static char fmt_char(const char *f) {
    if (!f) return 'B';
    while (*f == '@' || *f == '=' || *f == '<') f++;
    return *f;
}

static int fmt_ok(char got, char want) {
    if (got == want) return 1;
    /* same-size integer spellings: I/L (uint32 on LP64 buffers say 'I'), i/l, Q/L/K, q/l */
    if (want == 'I') return got == 'L';
    if (want == 'i') return got == 'l';
    if (want == 'Q') return got == 'L' || got == 'K';
    if (want == 'q') return got == 'l';
    return 0;
}

static int get_buf(PyObject *obj, Py_buffer *view, int flags, const char *what, char fmt,
                   Py_ssize_t itemsize) {
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        PyErr_Format(PyExc_TypeError, "%s: expected a buffer (numpy array)%s", what,
                     (flags & PyBUF_WRITABLE) ? " that is writable" : "");
        return -1;
    }
    if (view->itemsize != itemsize || !fmt_ok(fmt_char(view->format), fmt)) {
        PyErr_Format(PyExc_TypeError, "%s: expected items of format '%c' (%zd bytes), got '%s'", what,
                     fmt, itemsize, view->format ? view->format : "B");
        PyBuffer_Release(view);
        return -1;
    }
    if (view->ndim != 1) {
        PyErr_Format(PyExc_ValueError, "%s: expected a 1-D array, got %d dimensions", what, view->ndim);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static int get_words(PyObject *obj, Py_buffer *v, int writable, const char *what) {
    return get_buf(obj, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0), what, 'I', 4);
}

static PyObject *py_mask_binop(PyObject *module, PyObject *args, int is_and) {
    PyObject *od, *oa, *ob;
    if (!PyArg_ParseTuple(args, "OOO", &od, &oa, &ob)) return NULL;
    Py_buffer d, a, b;
    if (get_words(od, &d, 1, "dst") < 0) return NULL;
    if (get_words(oa, &a, 0, "a") < 0) { PyBuffer_Release(&d); return NULL; }
    if (get_words(ob, &b, 0, "b") < 0) { PyBuffer_Release(&d); PyBuffer_Release(&a); return NULL; }
    PyObject *ret = NULL;
    if (a.shape[0] != d.shape[0] || b.shape[0] != d.shape[0]) {
        PyErr_Format(PyExc_ValueError, "mask lengths differ: dst %zd, a %zd, b %zd words",
                     d.shape[0], a.shape[0], b.shape[0]);
    } else {
        const gd_kernels *k = state_of(module)->kernels;
        Py_BEGIN_ALLOW_THREADS
        if (is_and) gd_mask_and(k, d.buf, a.buf, b.buf, (size_t)d.shape[0]);
        else gd_mask_or(k, d.buf, a.buf, b.buf, (size_t)d.shape[0]);
        Py_END_ALLOW_THREADS
        ret = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&d);
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return ret;
}

static PyObject *py_mask_and(PyObject *self, PyObject *args) { return py_mask_binop(self, args, 1); }
static PyObject *py_mask_or(PyObject *self, PyObject *args) { return py_mask_binop(self, args, 0); }

static PyObject *py_mask_count(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *om;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "On", &om, &n)) return NULL;
    Py_buffer m;
    if (get_words(om, &m, 0, "mask") < 0) return NULL;
    if (n < 0 || n > m.shape[0] * 32) {
        PyBuffer_Release(&m);
        return PyErr_Format(PyExc_ValueError, "n=%zd outside the mask's %zd bits", n, m.shape[0] * 32);
    }
    size_t c = gd_mask_count(m.buf, (size_t)n);
    PyBuffer_Release(&m);
    return PyLong_FromSize_t(c);
}

static PyObject *py_mask_hash(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *om;
    if (!PyArg_ParseTuple(args, "O", &om)) return NULL;
    Py_buffer m;
    if (get_words(om, &m, 0, "mask") < 0) return NULL;
    uint64_t h = gd_mask_hash(m.buf, (size_t)m.shape[0]);
    PyBuffer_Release(&m);
    return PyLong_FromUnsignedLongLong((unsigned long long)h);
}

/* mask_digest(mask, n, ids_out_u32) -> (hash, count); ids written when count <= len(ids_out) */
static PyObject *py_mask_digest(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *om, *oi;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OnO", &om, &n, &oi)) return NULL;
    Py_buffer m, ids;
    if (get_words(om, &m, 0, "mask") < 0) return NULL;
    if (get_words(oi, &ids, 1, "ids") < 0) { PyBuffer_Release(&m); return NULL; }
    uint64_t h = 0;
    size_t c = 0;
    int ok = n >= 0 && (n + 31) / 32 <= m.shape[0];
    if (ok) c = gd_mask_digest(m.buf, (size_t)n, &h, ids.buf, (size_t)ids.shape[0]);
    PyBuffer_Release(&m);
    PyBuffer_Release(&ids);
    if (!ok) return PyErr_Format(PyExc_ValueError, "mask_digest: n must be 0 to 32 * len(mask)");
    return Py_BuildValue("Kn", (unsigned long long)h, (Py_ssize_t)c);
}

static PyObject *py_mask_equal(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oa, *ob;
    if (!PyArg_ParseTuple(args, "OO", &oa, &ob)) return NULL;
    Py_buffer a, b;
    if (get_words(oa, &a, 0, "a") < 0) return NULL;
    if (get_words(ob, &b, 0, "b") < 0) { PyBuffer_Release(&a); return NULL; }
    int eq = a.shape[0] == b.shape[0] && gd_mask_equal(a.buf, b.buf, (size_t)a.shape[0]);
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return PyBool_FromLong(eq);
}

static PyObject *py_mask_from_ids(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *om, *oi;
    if (!PyArg_ParseTuple(args, "OO", &om, &oi)) return NULL;
    Py_buffer m, ids;
    if (get_words(om, &m, 1, "mask") < 0) return NULL;
    if (get_words(oi, &ids, 0, "ids") < 0) { PyBuffer_Release(&m); return NULL; }
    gd_mask_from_ids(m.buf, (size_t)m.shape[0], ids.buf, (size_t)ids.shape[0]);
    PyBuffer_Release(&m);
    PyBuffer_Release(&ids);
    Py_RETURN_NONE;
}

static PyObject *py_mask_to_ids(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *om, *oi;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OnO", &om, &n, &oi)) return NULL;
    Py_buffer m, ids;
    if (get_words(om, &m, 0, "mask") < 0) return NULL;
    if (get_buf(oi, &ids, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE, "ids", 'q', 8) < 0) {
        PyBuffer_Release(&m);
        return NULL;
    }
    if (n < 0 || n > m.shape[0] * 32) {
        PyBuffer_Release(&m);
        PyBuffer_Release(&ids);
        return PyErr_Format(PyExc_ValueError, "n=%zd outside the mask's %zd bits", n, m.shape[0] * 32);
    }
    size_t k = gd_mask_to_ids(m.buf, (size_t)n, ids.buf, (size_t)ids.shape[0]);
    PyBuffer_Release(&m);
    PyBuffer_Release(&ids);
    return PyLong_FromSize_t(k);
}

static PyObject *py_mask_mark_next(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *om, *on, *ok;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OnOO", &om, &n, &on, &ok)) return NULL;
    Py_buffer m, nx, mk;
    if (get_words(om, &m, 0, "mask") < 0) return NULL;
    if (get_buf(on, &nx, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "next_state", 'i', 4) < 0) {
        PyBuffer_Release(&m);
        return NULL;
    }
    if (get_buf(ok, &mk, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE, "mark", 'B', 1) < 0) {
        PyBuffer_Release(&m);
        PyBuffer_Release(&nx);
        return NULL;
    }
    PyObject *ret = NULL;
    if (n < 0 || n > m.shape[0] * 32 || n > nx.shape[0]) {
        PyErr_Format(PyExc_ValueError, "n=%zd outside the mask's %zd bits or next_state's %zd entries", n,
                     m.shape[0] * 32, nx.shape[0]);
    } else {
        size_t k;
        Py_BEGIN_ALLOW_THREADS
        k = gd_mask_mark_next(m.buf, (size_t)n, nx.buf, mk.buf, (size_t)mk.shape[0]);
        Py_END_ALLOW_THREADS
        ret = PyLong_FromSize_t(k);
    }
    PyBuffer_Release(&m);
    PyBuffer_Release(&nx);
    PyBuffer_Release(&mk);
    return ret;
}

static PyObject *py_apply_mask(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"logits", "mask", "fill", NULL};
    PyObject *ol, *om;
    double fill = -INFINITY;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|d", kwlist, &ol, &om, &fill)) return NULL;
    Py_buffer l, m;
    if (get_buf(ol, &l, PyBUF_STRIDES | PyBUF_FORMAT | PyBUF_WRITABLE, "logits", 'f', 4) < 0) return NULL;
    if (get_words(om, &m, 0, "mask") < 0) { PyBuffer_Release(&l); return NULL; }
    Py_ssize_t n = l.shape[0];
    if (m.shape[0] * 32 < n) {
        PyBuffer_Release(&l);
        PyBuffer_Release(&m);
        return PyErr_Format(PyExc_ValueError,
                            "mask has %zd words (%zd tokens) but logits has %zd entries: the grammar "
                            "was compiled for a smaller vocabulary", m.shape[0], m.shape[0] * 32, n);
    }
    Py_ssize_t stride = l.strides ? l.strides[0] : 4;
    if (stride <= 0 || stride % 4 != 0) {
        PyBuffer_Release(&l);
        PyBuffer_Release(&m);
        return PyErr_Format(PyExc_ValueError, "logits stride %zd not supported (need a positive multiple of 4)", stride);
    }
    const gd_kernels *k = state_of(self)->kernels;
    Py_BEGIN_ALLOW_THREADS
    gd_apply_mask_strided_f32(k, l.buf, (size_t)n, (ptrdiff_t)stride, m.buf, (float)fill);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&l);
    PyBuffer_Release(&m);
    Py_RETURN_NONE;
}

static void trie_destroy(PyObject *cap) { gd_trie_free(PyCapsule_GetPointer(cap, TRIE_CAPSULE)); }

static PyObject *py_trie_build(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oblob, *ooff;
    if (!PyArg_ParseTuple(args, "OO", &oblob, &ooff)) return NULL;
    Py_buffer blob, off;
    if (PyObject_GetBuffer(oblob, &blob, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (get_buf(ooff, &off, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "offsets", 'Q', 8) < 0) {
        PyBuffer_Release(&blob);
        return NULL;
    }
    Py_ssize_t n = off.shape[0] - 1;
    const uint64_t *o = off.buf;
    if (n < 0 || (n >= 0 && o[n] > (uint64_t)blob.len)) {
        PyBuffer_Release(&blob);
        PyBuffer_Release(&off);
        return PyErr_Format(PyExc_ValueError, "offsets do not fit the blob");
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (o[i + 1] < o[i]) {
            PyBuffer_Release(&blob);
            PyBuffer_Release(&off);
            return PyErr_Format(PyExc_ValueError, "offsets decrease at token %zd", i);
        }
    gd_trie *t;
    Py_BEGIN_ALLOW_THREADS /* the build is re-entrant (no global state); buffers stay held */
    t = gd_trie_build(blob.buf, o, (uint32_t)n);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&blob);
    PyBuffer_Release(&off);
    if (!t) return PyErr_NoMemory();
    PyObject *cap = PyCapsule_New(t, TRIE_CAPSULE, trie_destroy);
    if (!cap) gd_trie_free(t);
    return cap;
}

static PyObject *py_trie_info(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    if (!PyArg_ParseTuple(args, "O", &cap)) return NULL;
    gd_trie *t = PyCapsule_GetPointer(cap, TRIE_CAPSULE);
    if (!t) return NULL;
    return Py_BuildValue("(nn)", (Py_ssize_t)gd_trie_nodes(t), (Py_ssize_t)gd_trie_bytes(t));
}

/* Character pairs of a plain-text profile (see gd_plain_step): NULL if they are consistent
 * with `rows` character states and `ncols` byte classes, else what is wrong. */
static const char *check_pairs(const Py_buffer *ro, const Py_buffer *cls, const Py_buffer *nx, Py_ssize_t ncols) {
    const int32_t *r = ro->buf;
    const uint8_t *c = cls->buf;
    const int16_t *n = nx->buf;
    Py_ssize_t rows = ro->shape[0] - 1, pairs = cls->shape[0];
    if (rows < 1 || nx->shape[0] != pairs || r[0] != 0 || r[rows] != pairs)
        return "row_off/pairs: row_off must run from 0 to the number of pairs";
    for (Py_ssize_t p = 0; p < rows; p++)
        if (r[p + 1] < r[p]) return "row_off: not non-decreasing";
    for (Py_ssize_t j = 0; j < pairs; j++)
        if (c[j] >= ncols || n[j] < 0 || n[j] >= rows) return "pairs: class not below ncols or next state out of range";
    return NULL;
}

/* char_pairs(char_dfa_i16, byte_class_u16, row_off_out_i32, pair_cls_out_u8, pair_next_out_i16) -> n_pairs
 * char_dfa: n_char * 256 entries (flattened); outputs: n_char + 1 and n_char * 256 entries. */
static PyObject *py_char_pairs(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[5];
    static const char *const what[5] = {"char_dfa", "byte_class", "row_off", "pair_cls", "pair_next"};
    static const char fmt[5] = {'h', 'H', 'i', 'B', 'h'};
    static const Py_ssize_t size[5] = {2, 2, 4, 1, 2};
    Py_buffer b[5];
    int k, got = 0;
    if (!PyArg_ParseTuple(args, "OOOOO", &o[0], &o[1], &o[2], &o[3], &o[4])) return NULL;
    for (k = 0; k < 5; k++, got++)
        if (get_buf(o[k], &b[k], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (k >= 2 ? PyBUF_WRITABLE : 0), what[k], fmt[k],
                    size[k]) < 0)
            break;
    const char *bad = NULL;
    int32_t n = 0;
    if (got == 5) {
        Py_ssize_t n_char = b[0].shape[0] / 256;
        if (b[0].shape[0] % 256 != 0 || n_char < 1 || n_char > 256) bad = "char_dfa: expected 1 to 256 rows of 256 entries";
        else if (b[1].shape[0] != 256) bad = "byte_class: expected 256 entries";
        else if (b[2].shape[0] != n_char + 1) bad = "row_off: expected one entry per character state, plus one";
        else if (b[3].shape[0] < n_char * 256 || b[4].shape[0] < n_char * 256)
            bad = "pair_cls/pair_next: expected room for 256 pairs per character state";
        else {
            n = gd_char_pairs(b[0].buf, (size_t)n_char, b[1].buf, b[2].buf, b[3].buf, b[4].buf);
            if (n < 0) bad = "more than 256 byte classes or a character state above 255";
        }
    }
    for (k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    if (got < 5) return NULL;
    if (bad) return PyErr_Format(PyExc_ValueError, "char_pairs: %s", bad);
    return PyLong_FromLong((long)n);
}

/* trie_walk(trie, classes, table, ncols, state, mask, next_state=None, sink=-1, plain=None)
 * plain: (node_plain_u8, row_off_i32, pair_cls_u8, pair_next_i16, loop_memo_u8) */
static PyObject *py_trie_walk(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *ocls, *otab, *omask, *onext = Py_None, *oplain = Py_None, *ret = NULL;
    int state, sink = -1;
    Py_ssize_t ncols;
    if (!PyArg_ParseTuple(args, "OOOniO|OiO", &cap, &ocls, &otab, &ncols, &state, &omask, &onext, &sink, &oplain))
        return NULL;
    gd_trie *t = PyCapsule_GetPointer(cap, TRIE_CAPSULE);
    if (!t) return NULL;
    Py_buffer cls = {0}, tab = {0}, mask = {0}, next = {0}, pb[5];
    int has_cls = 0, has_tab = 0, has_mask = 0, has_next = 0, n_plain = 0;
    const char *bad = NULL;
    if (PyObject_GetBuffer(ocls, &cls, PyBUF_C_CONTIGUOUS) < 0) goto done;
    has_cls = 1;
    if (cls.len != 256) {
        PyErr_Format(PyExc_ValueError, "classes must be 256 bytes (uint8 per byte value), got %zd", cls.len);
        goto done;
    }
    {
        const uint8_t *c = cls.buf;
        for (int b = 0; b < 256; b++)
            if (ncols <= 0 || c[b] >= ncols) {
                PyErr_Format(PyExc_ValueError, "class of byte %d is %d, not below ncols=%zd", b, c[b], ncols);
                goto done;
            }
    }
    if (PyObject_GetBuffer(otab, &tab, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done;
    has_tab = 1;
    {
        char f = fmt_char(tab.format);
        int ok = tab.ndim == 1 && ((tab.itemsize == 4 && fmt_ok(f, 'i')) || (tab.itemsize == 2 && f == 'h'));
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "table: expected a 1-D int32 or int16 array, got format '%s'",
                         tab.format ? tab.format : "B");
            goto done;
        }
    }
    if (get_words(omask, &mask, 1, "mask") < 0) goto done;
    has_mask = 1;
    if (onext != Py_None) {
        if (get_buf(onext, &next, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE, "next_state", 'i', 4) < 0)
            goto done;
        has_next = 1;
    }
    Py_ssize_t nstates = tab.shape[0] / ncols;
    if (tab.shape[0] % ncols != 0 || state < 0 || state >= nstates || (has_next && next.shape[0] < mask.shape[0] * 32)) {
        PyErr_Format(PyExc_ValueError, "bad walk arguments: table of %zd entries, state %d, next_state too short "
                     "or table not a multiple of ncols", tab.shape[0], state);
        goto done;
    }
    if (sink < -1 || sink >= nstates) bad = "sink: not a state";
    for (Py_ssize_t c = 0; !bad && sink >= 0 && c < ncols; c++) /* the sink's row must lead to itself */
        if ((tab.itemsize == 2 ? ((const int16_t *)tab.buf)[(size_t)sink * ncols + c]
                               : ((const int32_t *)tab.buf)[(size_t)sink * ncols + c]) != sink)
            bad = "sink: its row does not lead to itself";
    gd_walk_opts opts = {sink, NULL, NULL, NULL, NULL, NULL, -1};
    if (!bad && oplain != Py_None) {
        static const char *what[5] = {"node_plain", "row_off", "pair_cls", "pair_next", "loop_memo"};
        static const char fmt[5] = {'B', 'i', 'B', 'h', 'B'};
        static const Py_ssize_t size[5] = {1, 4, 1, 2, 1};
        if (!PyTuple_Check(oplain) || PyTuple_GET_SIZE(oplain) != 5) {
            PyErr_SetString(PyExc_TypeError, "plain: expected (node_plain, row_off, pair_cls, pair_next, loop_memo)");
            goto done;
        }
        for (; n_plain < 5; n_plain++)
            if (get_buf(PyTuple_GET_ITEM(oplain, n_plain), &pb[n_plain],
                        PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (n_plain == 4 ? PyBUF_WRITABLE : 0), what[n_plain],
                        fmt[n_plain], size[n_plain]) < 0)
                goto done;
        if (pb[0].shape[0] != (Py_ssize_t)gd_trie_nodes(t)) bad = "plain: node_plain must have one byte per trie node";
        else if (pb[4].shape[0] != nstates) bad = "plain: loop_memo must have one byte per automaton state";
        else bad = check_pairs(&pb[1], &pb[2], &pb[3], ncols);
        opts.node_plain = pb[0].buf;
        opts.row_off = pb[1].buf;
        opts.pair_cls = pb[2].buf;
        opts.pair_next = pb[3].buf;
        opts.loop_memo = pb[4].buf;
    }
    if (bad) {
        PyErr_Format(PyExc_ValueError, "trie_walk: %s", bad);
        goto done;
    }
    /* Every table entry must be a valid state or -1: checked once by the caller (index.py). */
    size_t allowed;
    Py_BEGIN_ALLOW_THREADS
    if (tab.itemsize == 2)
        allowed = gd_trie_walk_ex16(t, cls.buf, tab.buf, (size_t)ncols, state, mask.buf, (size_t)mask.shape[0],
                                    has_next ? next.buf : NULL, &opts);
    else
        allowed = gd_trie_walk_ex(t, cls.buf, tab.buf, (size_t)ncols, state, mask.buf, (size_t)mask.shape[0],
                                  has_next ? next.buf : NULL, &opts);
    Py_END_ALLOW_THREADS
    ret = PyLong_FromSize_t(allowed);
done:
    for (int k = 0; k < n_plain; k++) PyBuffer_Release(&pb[k]);
    if (has_next) PyBuffer_Release(&next);
    if (has_mask) PyBuffer_Release(&mask);
    if (has_tab) PyBuffer_Release(&tab);
    if (has_cls) PyBuffer_Release(&cls);
    return ret;
}

/* trie_plain_flags(trie, char_dfa_i16 (n * 256), out_u8[n_nodes]) */
static PyObject *py_trie_plain_flags(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *ocd, *oout;
    if (!PyArg_ParseTuple(args, "OOO", &cap, &ocd, &oout)) return NULL;
    gd_trie *t = PyCapsule_GetPointer(cap, TRIE_CAPSULE);
    if (!t) return NULL;
    Py_buffer cd, out;
    if (get_buf(ocd, &cd, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "char_dfa", 'h', 2) < 0) return NULL;
    if (get_buf(oout, &out, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE, "out", 'B', 1) < 0) {
        PyBuffer_Release(&cd);
        return NULL;
    }
    const char *bad = NULL;
    Py_ssize_t n_char = cd.shape[0] / 256;
    if (cd.shape[0] % 256 != 0 || n_char < 1 || n_char > 8) bad = "char_dfa must be int16[n * 256] with n in 1..8";
    else if (out.shape[0] != (Py_ssize_t)gd_trie_nodes(t)) bad = "out must have one byte per trie node";
    for (Py_ssize_t k = 0; !bad && k < cd.shape[0]; k++) {
        int16_t q = ((const int16_t *)cd.buf)[k];
        if (q < -1 || q >= n_char) bad = "char_dfa: a next state out of range";
    }
    if (!bad) {
        Py_BEGIN_ALLOW_THREADS
        gd_trie_plain_flags(t, cd.buf, (size_t)n_char, out.buf);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&cd);
    PyBuffer_Release(&out);
    if (bad) return PyErr_Format(PyExc_ValueError, "trie_plain_flags: %s", bad);
    Py_RETURN_NONE;
}

/* plain_chain(row_off_i32, pair_cls_u8, pair_next_i16, table_i32_or_i16, ncols, state, max_len) */
/* unit_walk(step_i32[n*256], starts_u8[n*256], q0, data_u8, off_i64, len_i64, count_out_i64): see
 * gd_unit_walk; ValueError when it refuses its arguments */
static PyObject *py_unit_walk(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[6];
    int q0;
    if (!PyArg_ParseTuple(args, "OOiOOOO", &o[0], &o[1], &q0, &o[2], &o[3], &o[4], &o[5])) return NULL;
    const char *const names[6] = {"step", "starts", "data", "off", "len", "count"};
    const char fmts[6] = {'i', 'B', 'B', 'q', 'q', 'q'};
    const Py_ssize_t sizes[6] = {4, 1, 1, 8, 8, 8};
    Py_buffer b[6];
    for (int i = 0; i < 6; i++)
        if (get_buf(o[i], &b[i], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (i == 5 ? PyBUF_WRITABLE : 0), names[i], fmts[i],
                    sizes[i]) < 0) {
            while (i--) PyBuffer_Release(&b[i]);
            return NULL;
        }
    const char *bad = NULL;
    size_t n_states = (size_t)b[0].shape[0] / 256, n = (size_t)b[3].shape[0];
    if (b[0].shape[0] % 256 || b[1].shape[0] != b[0].shape[0]) bad = "step and starts: n_states * 256 each";
    else if (b[4].shape[0] != b[3].shape[0] || b[5].shape[0] != b[3].shape[0]) bad = "off, len, count: one per walker";
    else {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = gd_unit_walk(b[0].buf, b[1].buf, n_states, q0, b[2].buf, (size_t)b[2].shape[0], b[3].buf, b[4].buf, n,
                          b[5].buf);
        Py_END_ALLOW_THREADS
        if (rc < 0) bad = "a state, a step or a walker's bytes out of range";
    }
    for (int i = 0; i < 6; i++) PyBuffer_Release(&b[i]);
    if (bad) return PyErr_Format(PyExc_ValueError, "unit_walk: %s", bad);
    Py_RETURN_NONE;
}

static PyObject *py_plain_chain(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oro, *ocls, *onext, *otab;
    Py_ssize_t ncols;
    int state;
    unsigned int max_len;
    if (!PyArg_ParseTuple(args, "OOOOniI", &oro, &ocls, &onext, &otab, &ncols, &state, &max_len)) return NULL;
    Py_buffer ro, cls, nx, tab;
    if (get_buf(oro, &ro, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "row_off", 'i', 4) < 0) return NULL;
    if (get_buf(ocls, &cls, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "pair_cls", 'B', 1) < 0) {
        PyBuffer_Release(&ro);
        return NULL;
    }
    if (get_buf(onext, &nx, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "pair_next", 'h', 2) < 0) {
        PyBuffer_Release(&ro);
        PyBuffer_Release(&cls);
        return NULL;
    }
    if (PyObject_GetBuffer(otab, &tab, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&ro);
        PyBuffer_Release(&cls);
        PyBuffer_Release(&nx);
        return NULL;
    }
    const char *bad = NULL;
    {
        char f = fmt_char(tab.format);
        if (!(tab.ndim == 1 && ((tab.itemsize == 4 && fmt_ok(f, 'i')) || (tab.itemsize == 2 && f == 'h'))))
            bad = "table: expected a 1-D int32 or int16 array";
    }
    const int32_t *r = ro.buf;
    const uint8_t *c = cls.buf;
    const int16_t *n = nx.buf;
    Py_ssize_t nstates = (!bad && ncols > 0) ? tab.shape[0] / ncols : 0;
    if (!bad && (ncols <= 0 || tab.shape[0] % ncols != 0)) bad = "table: length is not a multiple of ncols";
    if (!bad) bad = check_pairs(&ro, &cls, &nx, ncols);
    if (!bad && (state < 0 || state >= nstates)) bad = "state out of range";
    int64_t k = 0;
    if (!bad) {
        Py_BEGIN_ALLOW_THREADS
        if (tab.itemsize == 2)
            k = gd_plain_chain16(r, c, n, tab.buf, (size_t)ncols, (size_t)nstates, state, max_len);
        else
            k = gd_plain_chain(r, c, n, tab.buf, (size_t)ncols, (size_t)nstates, state, max_len);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&ro);
    PyBuffer_Release(&cls);
    PyBuffer_Release(&nx);
    PyBuffer_Release(&tab);
    if (bad) return PyErr_Format(PyExc_ValueError, "plain_chain: %s", bad);
    if (k == GD_PLAIN_NOMEM) return PyErr_NoMemory();
    return PyLong_FromLongLong((long long)k);
}

/* ---- state maskers (gd_state_masker) ------------------------------------------------------
 * Two capsules, each holding the buffers it points into: the plain-text profiles of one
 * vocabulary (masker_profiles, made once per vocabulary), and one masker per DFA table
 * (state_masker), which keeps its profiles capsule alive. */
#define PROFILES_CAPSULE "decoding._native.masker_profiles"
#define MASKER_CAPSULE "decoding._native.state_masker"
#define PROFILES_BUFS (GD_MASKER_PROFILES * (7 + GD_MASKER_UPTO))
#define MASKER_BUFS (5 + GD_MASKER_PROFILES)

typedef struct {
    gd_masker_profile prof[GD_MASKER_PROFILES];
    int32_t n;
    const gd_trie *trie;
    size_t n_tokens;
    PyObject *keep; /* the arguments: the tries (capsules) and arrays stay alive */
    Py_buffer bufs[PROFILES_BUFS];
    int n_bufs;
} profiles_box;

typedef struct {
    gd_state_masker sm;
    size_t n_tokens;
    PyObject *keep; /* the arguments, the profiles capsule among them */
    Py_buffer bufs[MASKER_BUFS];
    int n_bufs;
} masker_box;

static void release_bufs(Py_buffer *bufs, int n, PyObject *keep) {
    for (int i = 0; i < n; i++) PyBuffer_Release(&bufs[i]);
    Py_XDECREF(keep);
}

static void profiles_free(profiles_box *b) {
    release_bufs(b->bufs, b->n_bufs, b->keep);
    PyMem_Free(b);
}

static void masker_free(masker_box *b) {
    gd_state_masker_release(&b->sm);
    release_bufs(b->bufs, b->n_bufs, b->keep);
    PyMem_Free(b);
}

static void profiles_destroy(PyObject *cap) { profiles_free(PyCapsule_GetPointer(cap, PROFILES_CAPSULE)); }
static void masker_destroy(PyObject *cap) { masker_free(PyCapsule_GetPointer(cap, MASKER_CAPSULE)); }

/* the next buffer of bufs (NULL + exception on a bad one) */
static Py_buffer *next_buf(Py_buffer *bufs, int *n, PyObject *o, const char *what, char fmt, Py_ssize_t size,
                           int writable) {
    Py_buffer *v = &bufs[*n];
    if (get_buf(o, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0), what, fmt, size) < 0)
        return NULL;
    (*n)++;
    return v;
}

static const char *masker_profile(profiles_box *b, PyObject *t, gd_masker_profile *p) {
    PyObject *oo, *oonp, *onp, *ocd, *oprobe, *oplain, *oupto, *oids, *on, *orest = Py_None;
    unsigned int max_chars;
    if (!PyTuple_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "masker_profiles: each profile must be a tuple");
        return "";
    }
    if (!PyArg_ParseTuple(t, "OOOOOIOOOO|O;profile: (other_trie, other_node_plain, node_plain, char_dfa, probes, "
                          "max_chars, plain_mask, upto, by_chars_ids, by_chars_n[, rest_trie or None])",
                          &oo, &oonp, &onp, &ocd, &oprobe, &max_chars, &oplain, &oupto, &oids, &on, &orest))
        return "";
    if (!(p->other_trie = PyCapsule_GetPointer(oo, TRIE_CAPSULE))) return "";
    p->rest_trie = NULL;
    if (orest != Py_None && !(p->rest_trie = PyCapsule_GetPointer(orest, TRIE_CAPSULE))) return "";
    Py_buffer *v[7], *bb = b->bufs;
    int *n = &b->n_bufs;
    if (!(v[0] = next_buf(bb, n, oonp, "other_node_plain", 'B', 1, 0)) || !(v[1] = next_buf(bb, n, onp, "node_plain", 'B', 1, 0)) ||
        !(v[2] = next_buf(bb, n, ocd, "char_dfa", 'h', 2, 0)) || !(v[3] = next_buf(bb, n, oprobe, "probes", 'B', 1, 0)) ||
        !(v[4] = next_buf(bb, n, oplain, "plain_mask", 'I', 4, 0)) ||
        !(v[5] = next_buf(bb, n, oids, "by_chars_ids", 'I', 4, 0)) || !(v[6] = next_buf(bb, n, on, "by_chars_n", 'i', 4, 0)))
        return "";
    size_t nwords = (b->n_tokens + 31) / 32;
    if (v[0]->shape[0] != (Py_ssize_t)gd_trie_nodes(p->other_trie)) return "other_node_plain: one byte per node of other_trie";
    if (v[1]->shape[0] != (Py_ssize_t)gd_trie_nodes(b->trie)) return "node_plain: one byte per node of the trie";
    Py_ssize_t n_char = v[2]->shape[0] / 256;
    if (v[2]->shape[0] % 256 || n_char < 1 || n_char > 8) return "char_dfa: int16[n * 256] with n in 1..8";
    for (Py_ssize_t k = 0; k < v[2]->shape[0]; k++) {
        int16_t q = ((const int16_t *)v[2]->buf)[k];
        if (q < -1 || q >= n_char) return "char_dfa: a next state out of range";
    }
    if (v[4]->shape[0] != (Py_ssize_t)nwords) return "plain_mask: not nwords words";
    if (v[5]->shape[0] != v[6]->shape[0]) return "by_chars_ids and by_chars_n differ in length";
    if (!PyTuple_Check(oupto) || PyTuple_GET_SIZE(oupto) != GD_MASKER_UPTO) return "upto: a tuple of 9 masks or None";
    for (int k = 0; k < GD_MASKER_UPTO; k++) {
        PyObject *u = PyTuple_GET_ITEM(oupto, k);
        p->upto[k] = NULL;
        if (u == Py_None) continue;
        Py_buffer *vu = next_buf(bb, n, u, "upto", 'I', 4, 0);
        if (!vu) return "";
        if (vu->shape[0] != (Py_ssize_t)nwords) return "upto: not nwords words";
        p->upto[k] = vu->buf;
    }
    p->other_node_plain = v[0]->buf;
    p->node_plain = v[1]->buf;
    p->char_dfa = v[2]->buf;
    p->n_char = (size_t)n_char;
    p->probes = v[3]->buf;
    p->n_probes = (size_t)v[3]->shape[0];
    p->max_chars = max_chars;
    p->plain_mask = v[4]->buf;
    p->by_chars_ids = v[5]->buf; /* (ids past the vocabulary are skipped by the core; not scanned here) */
    p->by_chars_n = v[6]->buf;
    p->n_plain = (size_t)v[6]->shape[0];
    return NULL;
}

/* masker_profiles(trie, n_tokens, profiles) -> capsule: the plain-text profiles a masker tries, in
 * order, each (other_trie, other_node_plain, node_plain, char_dfa, probes, max_chars, plain_mask,
 * upto (9 masks or None), by_chars_ids, by_chars_n); see gd_state_mask. */
static PyObject *py_masker_profiles(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *oprof;
    Py_ssize_t n_tokens;
    if (!PyArg_ParseTuple(args, "OnO", &cap, &n_tokens, &oprof)) return NULL;
    gd_trie *t = PyCapsule_GetPointer(cap, TRIE_CAPSULE);
    if (!t) return NULL;
    if (n_tokens <= 0) return PyErr_Format(PyExc_ValueError, "masker_profiles: n_tokens must be positive");
    if (!PyTuple_Check(oprof) || PyTuple_GET_SIZE(oprof) > GD_MASKER_PROFILES)
        return PyErr_Format(PyExc_ValueError, "masker_profiles: a tuple of at most %d profiles", GD_MASKER_PROFILES);
    profiles_box *b = PyMem_Calloc(1, sizeof(profiles_box));
    if (!b) return PyErr_NoMemory();
    b->keep = Py_NewRef(args);
    b->trie = t;
    b->n_tokens = (size_t)n_tokens;
    for (Py_ssize_t p = 0; p < PyTuple_GET_SIZE(oprof); p++) {
        const char *bad = masker_profile(b, PyTuple_GET_ITEM(oprof, p), &b->prof[p]);
        if (bad) {
            if (*bad) PyErr_Format(PyExc_ValueError, "masker_profiles: %s", bad);
            profiles_free(b);
            return NULL;
        }
        b->n++;
    }
    PyObject *ret = PyCapsule_New(b, PROFILES_CAPSULE, profiles_destroy);
    if (!ret) profiles_free(b);
    return ret;
}

/* state_masker(profiles, classes_u8[256], table_i32_or_i16, ncols, n_classes, special_ids_u32,
 *              accepting_u8, eog_mask_or_None, loop_memos) -> capsule; see gd_state_mask.
 * loop_memos: one writable uint8[n_states] per profile.  Every table entry must be a valid
 * state or -1 (checked once by the caller, index.py). */
static PyObject *py_state_masker(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *pcap, *ocls, *otab, *ospec, *oacc, *oeog, *omemo;
    Py_ssize_t ncols, n_classes;
    if (!PyArg_ParseTuple(args, "OOOnnOOOO", &pcap, &ocls, &otab, &ncols, &n_classes, &ospec, &oacc, &oeog, &omemo))
        return NULL;
    profiles_box *pb = PyCapsule_GetPointer(pcap, PROFILES_CAPSULE);
    if (!pb) return NULL;
    masker_box *b = PyMem_Calloc(1, sizeof(masker_box));
    if (!b) return PyErr_NoMemory();
    b->keep = Py_NewRef(args);
    gd_state_masker *sm = &b->sm;
    Py_buffer *bb = b->bufs;
    int *n = &b->n_bufs;
    sm->trie = pb->trie;
    sm->sink = -1;
    b->n_tokens = pb->n_tokens;
    sm->nwords = (b->n_tokens + 31) / 32;
    sm->prof = pb->prof;
    const char *bad = NULL;
    Py_buffer *vc, *vt, *vs, *va;
    if (!(vc = next_buf(bb, n, ocls, "classes", 'B', 1, 0))) goto fail;
    vt = &bb[*n];
    if (PyObject_GetBuffer(otab, vt, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto fail;
    (*n)++;
    {
        char f = fmt_char(vt->format);
        if (!(vt->ndim == 1 && ((vt->itemsize == 4 && fmt_ok(f, 'i')) || (vt->itemsize == 2 && f == 'h')))) {
            bad = "table: expected a 1-D int32 or int16 array";
            goto fail;
        }
    }
    if (!(vs = next_buf(bb, n, ospec, "special_ids", 'I', 4, 0)) || !(va = next_buf(bb, n, oacc, "accepting", 'B', 1, 0)))
        goto fail;
    if (vc->shape[0] != 256) bad = "classes: 256 entries";
    else if (ncols <= 0 || n_classes <= 0 || n_classes + vs->shape[0] > ncols) bad = "ncols below the classes and specials";
    else if (vt->shape[0] % ncols) bad = "table: length not a multiple of ncols";
    if (bad) goto fail;
    for (int x = 0; x < 256 && !bad; x++)
        if (((const uint8_t *)vc->buf)[x] >= n_classes) bad = "classes: a class not below n_classes";
    for (Py_ssize_t k = 0; k < vs->shape[0] && !bad; k++)
        if (((const uint32_t *)vs->buf)[k] >= b->n_tokens) bad = "special_ids: an id past the vocabulary";
    sm->classes = vc->buf;
    sm->table = vt->buf;
    sm->table16 = vt->itemsize == 2;
    sm->ncols = (size_t)ncols;
    sm->n_classes = (size_t)n_classes;
    sm->n_states = (size_t)(vt->shape[0] / ncols);
    sm->special_ids = vs->buf;
    sm->n_special = (size_t)vs->shape[0];
    sm->accepting = va->buf;
    if (!bad && va->shape[0] != (Py_ssize_t)sm->n_states) bad = "accepting: one byte per state";
    if (bad) goto fail;
    if (oeog != Py_None) {
        Py_buffer *ve = next_buf(bb, n, oeog, "eog_mask", 'I', 4, 0);
        if (!ve) goto fail;
        if (ve->shape[0] != (Py_ssize_t)sm->nwords) { bad = "eog_mask: not nwords words"; goto fail; }
        sm->eog_mask = ve->buf;
    }
    if (!PyTuple_Check(omemo) || PyTuple_GET_SIZE(omemo) != pb->n) {
        bad = "loop_memos: one per profile";
        goto fail;
    }
    for (int32_t p = 0; p < pb->n; p++) {
        Py_buffer *vm = next_buf(bb, n, PyTuple_GET_ITEM(omemo, p), "loop_memo", 'B', 1, 1);
        if (!vm) goto fail;
        if (vm->shape[0] != (Py_ssize_t)sm->n_states) { bad = "loop_memo: one byte per automaton state"; goto fail; }
        sm->loop[p].loop_memo = vm->buf;
    }
    sm->n_profiles = pb->n;
    PyObject *ret = PyCapsule_New(b, MASKER_CAPSULE, masker_destroy);
    if (!ret) masker_free(b);
    return ret;
fail:
    if (bad) PyErr_Format(PyExc_ValueError, "state_masker: %s", bad);
    masker_free(b);
    return NULL;
}

/* lazy_masker(profiles, classes_u8[256], lazy, special_ids_u32, eog_mask_or_None) -> capsule: a
 * gd_lazy_masker over a lazy automaton (special_ids: one per special column; UINT32_MAX where no
 * token spells it, as the counted strings' markers) (see gd_lazy_state_mask), keeping its arguments alive;
 * state_mask_intern takes it as it takes a state masker (with the GIL held: the automaton is
 * not thread-safe).  The profiles' memo slots are their indices. */
#define LAZY_MASKER_CAPSULE "decoding._native.lazy_masker"
#define LAZY_MASKER_BUFS 3

typedef struct {
    gd_lazy_masker lm;
    size_t n_tokens;
    PyObject *keep;
    Py_buffer bufs[LAZY_MASKER_BUFS];
    int n_bufs;
} lazy_masker_box;

static void lazy_masker_free(lazy_masker_box *b) {
    gd_lazy_masker_release(&b->lm);
    release_bufs(b->bufs, b->n_bufs, b->keep);
    PyMem_Free(b);
}

static void lazy_masker_destroy(PyObject *cap) { lazy_masker_free(PyCapsule_GetPointer(cap, LAZY_MASKER_CAPSULE)); }

static gd_lazy *lazy_of(PyObject *cap);
static PyObject *lazy_failed(gd_lazy *L, const char *what);

static PyObject *py_lazy_masker(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *pcap, *ocls, *lcap, *ospec, *oeog;
    if (!PyArg_ParseTuple(args, "OOOOO", &pcap, &ocls, &lcap, &ospec, &oeog)) return NULL;
    profiles_box *pb = PyCapsule_GetPointer(pcap, PROFILES_CAPSULE);
    if (!pb) return NULL;
    gd_lazy *L = lazy_of(lcap);
    if (!L) return NULL;
    if (pb->n > 8) return PyErr_Format(PyExc_ValueError, "lazy_masker: at most 8 profiles (memo slots)");
    lazy_masker_box *b = PyMem_Calloc(1, sizeof(lazy_masker_box));
    if (!b) return PyErr_NoMemory();
    b->keep = Py_NewRef(args);
    gd_lazy_masker *lm = &b->lm;
    Py_buffer *bb = b->bufs, *vc, *vs;
    int *n = &b->n_bufs;
    const char *bad = NULL;
    lm->trie = pb->trie;
    lm->L = L;
    b->n_tokens = pb->n_tokens;
    lm->nwords = (b->n_tokens + 31) / 32;
    lm->prof = pb->prof;
    lm->n_profiles = pb->n;
    lm->n_classes = (size_t)gd_lazy_n_classes(L);
    if (!(vc = next_buf(bb, n, ocls, "classes", 'B', 1, 0)) || !(vs = next_buf(bb, n, ospec, "special_ids", 'I', 4, 0)))
        goto fail;
    if (vc->shape[0] != 256) bad = "classes: 256 entries";
    else if ((int32_t)(lm->n_classes + (size_t)vs->shape[0]) != gd_lazy_nsym(L))
        bad = "special_ids: not one per special symbol of the automaton";
    for (int x = 0; x < 256 && !bad; x++)
        if (((const uint8_t *)vc->buf)[x] != gd_lazy_byte_class(L)[x]) bad = "classes: not the automaton's byte classes";
    for (Py_ssize_t k = 0; k < vs->shape[0] && !bad; k++) /* (UINT32_MAX: a column no token spells) */
        if (((const uint32_t *)vs->buf)[k] >= b->n_tokens && ((const uint32_t *)vs->buf)[k] != UINT32_MAX)
            bad = "special_ids: an id past the vocabulary";
    if (bad) goto fail;
    lm->classes = vc->buf;
    lm->special_ids = vs->buf;
    lm->n_special = (size_t)vs->shape[0];
    if (oeog != Py_None) {
        Py_buffer *ve = next_buf(bb, n, oeog, "eog_mask", 'I', 4, 0);
        if (!ve) goto fail;
        if (ve->shape[0] != (Py_ssize_t)lm->nwords) { bad = "eog_mask: not nwords words"; goto fail; }
        lm->eog_mask = ve->buf;
    }
    PyObject *ret = PyCapsule_New(b, LAZY_MASKER_CAPSULE, lazy_masker_destroy);
    if (!ret) lazy_masker_free(b);
    return ret;
fail:
    if (bad) PyErr_Format(PyExc_ValueError, "lazy_masker: %s", bad);
    lazy_masker_free(b);
    return NULL;
}

/* state_mask(masker, state, mask_out, ids_out) -> (hash, n, inverted): the state's mask into
 * mask_out, then its digest (mask_digest): n set bits with their ids in ids_out when at most
 * len(ids_out); else, when the clear bits are that few, inverted and their ids and count. */
static PyObject *py_state_mask(PyObject *module, PyObject *args) {
    PyObject *cap, *om, *oi;
    int state;
    if (!PyArg_ParseTuple(args, "OiOO", &cap, &state, &om, &oi)) return NULL;
    masker_box *b = PyCapsule_GetPointer(cap, MASKER_CAPSULE);
    if (!b) return NULL;
    Py_buffer m, ids;
    if (get_words(om, &m, 1, "mask") < 0) return NULL;
    if (get_words(oi, &ids, 1, "ids") < 0) { PyBuffer_Release(&m); return NULL; }
    PyObject *ret = NULL;
    if (m.shape[0] != (Py_ssize_t)b->sm.nwords) {
        PyErr_SetString(PyExc_ValueError, "state_mask: mask is not nwords words");
    } else {
        const gd_kernels *k = state_of(module)->kernels;
        size_t cap_ids = (size_t)ids.shape[0], c = 0;
        uint64_t h = 0;
        int rc, inverted = 0;
        Py_BEGIN_ALLOW_THREADS
        rc = gd_state_mask(k, &b->sm, state, m.buf);
        if (rc == 0) {
            c = gd_mask_digest(m.buf, b->n_tokens, &h, ids.buf, cap_ids);
            if (c > cap_ids && b->n_tokens - c <= cap_ids) {
                c = gd_mask_clear_ids(m.buf, b->n_tokens, ids.buf, cap_ids);
                inverted = 1;
            }
        }
        Py_END_ALLOW_THREADS
        if (rc == -1) PyErr_Format(PyExc_ValueError, "state_mask: state %d out of range", state);
        else if (rc) PyErr_NoMemory();
        else ret = Py_BuildValue("Kni", (unsigned long long)h, (Py_ssize_t)c, inverted);
    }
    PyBuffer_Release(&m);
    PyBuffer_Release(&ids);
    return ret;
}

/* ---- mask index (gd_mask_index): the interning index of sparse masks, one per MaskTable ----
 * Every call on an index runs with the GIL held (the core index is not thread-safe): a read
 * from one thread never meets another thread's write, which may move the arena. */
#define MASK_INDEX_CAPSULE "decoding._native.mask_index"

static void mask_index_destroy(PyObject *cap) { gd_mask_index_free(PyCapsule_GetPointer(cap, MASK_INDEX_CAPSULE)); }

static PyObject *py_mask_index(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    gd_mask_index *ix = gd_mask_index_new();
    if (!ix) return PyErr_NoMemory();
    PyObject *cap = PyCapsule_New(ix, MASK_INDEX_CAPSULE, mask_index_destroy);
    if (!cap) gd_mask_index_free(ix);
    return cap;
}

/* the result of gd_mask_index_intern as a Python int, or NULL + exception */
static PyObject *intern_result(int32_t mid) {
    if (mid == -2) return PyErr_NoMemory();
    if (mid == -3) return PyErr_Format(PyExc_ValueError, "mask_index_intern: new_mid already names a mask");
    return PyLong_FromLong((long)mid);
}

/* mask_index_intern(index, hash, ids_u32, count, inverted, new_mid) -> mid (see gd_mask_index_intern) */
static PyObject *py_mask_index_intern(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *oi;
    unsigned long long h;
    Py_ssize_t count;
    int inverted, new_mid;
    if (!PyArg_ParseTuple(args, "OKOnpi", &cap, &h, &oi, &count, &inverted, &new_mid)) return NULL;
    gd_mask_index *ix = PyCapsule_GetPointer(cap, MASK_INDEX_CAPSULE);
    if (!ix) return NULL;
    Py_buffer ids;
    if (get_words(oi, &ids, 0, "ids") < 0) return NULL;
    int32_t mid = -1;
    int ok = count >= 0 && count <= ids.shape[0];
    if (ok) mid = gd_mask_index_intern(ix, (uint64_t)h, ids.buf, (size_t)count, inverted, (int32_t)new_mid);
    PyBuffer_Release(&ids);
    if (!ok) return PyErr_Format(PyExc_ValueError, "mask_index_intern: count must be 0 to len(ids)");
    return intern_result(mid);
}

/* mask_index_expand(index, mid, mask_out_u32, n): mask = mask mid over n tokens */
static PyObject *py_mask_index_expand(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *om;
    int mid;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OiOn", &cap, &mid, &om, &n)) return NULL;
    gd_mask_index *ix = PyCapsule_GetPointer(cap, MASK_INDEX_CAPSULE);
    if (!ix) return NULL;
    Py_buffer m;
    if (get_words(om, &m, 1, "mask") < 0) return NULL;
    int rc = -2;
    if (n >= 0 && (n + 31) / 32 == m.shape[0]) rc = gd_mask_index_expand(ix, (int32_t)mid, m.buf, (size_t)n);
    PyBuffer_Release(&m);
    if (rc == -2) return PyErr_Format(PyExc_ValueError, "mask_index_expand: the mask must have (n + 31) // 32 words");
    if (rc) return PyErr_Format(PyExc_KeyError, "mask_index_expand: mask %d is not in the index", mid);
    Py_RETURN_NONE;
}

/* mask_index_ids(index, mid, ids_out_u32) -> (count, inverted): the stored ids of mask mid */
static PyObject *py_mask_index_ids(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *oi;
    int mid;
    if (!PyArg_ParseTuple(args, "OiO", &cap, &mid, &oi)) return NULL;
    gd_mask_index *ix = PyCapsule_GetPointer(cap, MASK_INDEX_CAPSULE);
    if (!ix) return NULL;
    const uint32_t *src;
    size_t count = 0;
    int inverted = 0;
    if (gd_mask_index_get(ix, (int32_t)mid, &src, &count, &inverted))
        return PyErr_Format(PyExc_KeyError, "mask_index_ids: mask %d is not in the index", mid);
    Py_buffer ids;
    if (get_words(oi, &ids, 1, "ids") < 0) return NULL;
    int ok = (Py_ssize_t)count <= ids.shape[0];
    if (ok && count) memcpy(ids.buf, src, count * sizeof *src);
    PyBuffer_Release(&ids);
    if (!ok) return PyErr_Format(PyExc_ValueError, "mask_index_ids: %zu ids do not fit", count);
    return Py_BuildValue("nO", (Py_ssize_t)count, inverted ? Py_True : Py_False);
}

static PyObject *py_mask_index_bytes(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    if (!PyArg_ParseTuple(args, "O", &cap)) return NULL;
    gd_mask_index *ix = PyCapsule_GetPointer(cap, MASK_INDEX_CAPSULE);
    if (!ix) return NULL;
    return PyLong_FromSize_t(gd_mask_index_bytes(ix));
}

/* state_mask_intern(masker, state, mask_out, ids_out, index, new_mid) -> (mid, hash, n, inverted):
 * state_mask, then, for a sparse mask (n <= len(ids_out), set or, inverted, clear bits), its id in
 * the index (added as new_mid when absent and new_mid >= 0); mid = -1 for a dense mask or when
 * absent and new_mid < 0. */
static PyObject *py_state_mask_intern(PyObject *module, PyObject *args) {
    PyObject *cap, *om, *oi, *oix;
    int state, new_mid;
    if (!PyArg_ParseTuple(args, "OiOOOi", &cap, &state, &om, &oi, &oix, &new_mid)) return NULL;
    /* a state masker, or a lazy masker (its automaton is not thread-safe: the GIL stays held) */
    int lazy = PyCapsule_IsValid(cap, LAZY_MASKER_CAPSULE);
    masker_box *b = lazy ? NULL : PyCapsule_GetPointer(cap, MASKER_CAPSULE);
    lazy_masker_box *lb = lazy ? PyCapsule_GetPointer(cap, LAZY_MASKER_CAPSULE) : NULL;
    if (!b && !lb) return NULL;
    size_t nwords = lazy ? lb->lm.nwords : b->sm.nwords, n_tokens = lazy ? lb->n_tokens : b->n_tokens;
    gd_mask_index *ix = PyCapsule_GetPointer(oix, MASK_INDEX_CAPSULE);
    if (!ix) return NULL;
    Py_buffer m, ids;
    if (get_words(om, &m, 1, "mask") < 0) return NULL;
    if (get_words(oi, &ids, 1, "ids") < 0) { PyBuffer_Release(&m); return NULL; }
    PyObject *ret = NULL;
    if (m.shape[0] != (Py_ssize_t)nwords) {
        PyErr_SetString(PyExc_ValueError, "state_mask_intern: mask is not nwords words");
    } else {
        const gd_kernels *k = state_of(module)->kernels;
        size_t cap_ids = (size_t)ids.shape[0], c = 0;
        uint64_t h = 0;
        int rc, inverted = 0;
        int32_t mid = -1;
        PyThreadState *ts = lazy ? NULL : PyEval_SaveThread();
        rc = lazy ? gd_lazy_state_mask(k, &lb->lm, state, m.buf) : gd_state_mask(k, &b->sm, state, m.buf);
        if (rc == 0) {
            c = gd_mask_digest(m.buf, n_tokens, &h, ids.buf, cap_ids);
            if (c > cap_ids && n_tokens - c <= cap_ids) {
                c = gd_mask_clear_ids(m.buf, n_tokens, ids.buf, cap_ids);
                inverted = 1;
            }
        }
        if (ts) PyEval_RestoreThread(ts);
        /* (with the GIL: every call on an index holds it, so reads such as mask_index_expand
         * never meet a write that moves the arena) */
        if (rc == 0 && c <= cap_ids) mid = gd_mask_index_intern(ix, h, ids.buf, c, inverted, (int32_t)new_mid);
        if (rc == -1) PyErr_Format(PyExc_ValueError, "state_mask_intern: state %d out of range", state);
        else if (rc == -3) lazy_failed(lb->lm.L, "state_mask_intern");
        else if (rc) PyErr_NoMemory();
        else {
            PyObject *o = intern_result(mid);
            if (o) ret = Py_BuildValue("NKnO", o, (unsigned long long)h, (Py_ssize_t)c, inverted ? Py_True : Py_False);
        }
    }
    PyBuffer_Release(&m);
    PyBuffer_Release(&ids);
    return ret;
}

/* state_run(masker, state, data_bytes) -> the state after the bytes, -1 if rejected on the way */
static PyObject *py_state_run(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    int state;
    const char *data;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "Oiy#", &cap, &state, &data, &n)) return NULL;
    masker_box *b = PyCapsule_GetPointer(cap, MASKER_CAPSULE);
    if (!b) return NULL;
    return PyLong_FromLong((long)gd_state_run(&b->sm, state, (const uint8_t *)data, (size_t)n));
}

/* ---- pushdown configurations ---------------------------------------------------------- */
#define PD_CAPSULE "decoding._native.pushdown"
#define PD_BUFS 13

typedef struct {
    gd_pd pd;
    PyObject *keep; /* the arguments: the arrays stay alive */
    Py_buffer bufs[PD_BUFS];
    int n_bufs;
} pd_box;

static void pd_free(pd_box *b) {
    release_bufs(b->bufs, b->n_bufs, b->keep);
    PyMem_Free(b);
}

static void pd_destroy(PyObject *cap) { pd_free(PyCapsule_GetPointer(cap, PD_CAPSULE)); }

/* pd_new(max_depth, blob, offsets_u64, trans_off_i64, trans_i32, n_cls_i32, state_off_i32, byte_class_u8,
 *        accepting_u8, call_off_i32, call_x_i32, call_t_i32, spec_off_i32, spec_t_i32) -> capsule (see gd_pd); every entry is
 * checked here once, so gd_pd_check only checks its own arguments. */
static PyObject *py_pd_new(PyObject *self, PyObject *args) {
    (void)self;
    int max_depth;
    PyObject *o[13];
    if (!PyArg_ParseTuple(args, "iOOOOOOOOOOOOO", &max_depth, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &o[9], &o[10], &o[11], &o[12]))
        return NULL;
    pd_box *b = PyMem_Calloc(1, sizeof(pd_box));
    if (!b) return PyErr_NoMemory();
    b->keep = Py_NewRef(args);
    const char *bad = NULL;
    static const char *const what[13] = {"blob", "offsets", "trans_off", "trans", "n_cls", "state_off",
                                         "byte_class", "accepting", "call_off", "call_x", "call_t", "spec_off",
                                         "spec_t"};
    static const char fmt[13] = {'B', 'Q', 'q', 'i', 'i', 'i', 'B', 'B', 'i', 'i', 'i', 'i', 'i'};
    static const Py_ssize_t size[13] = {1, 8, 8, 4, 4, 4, 1, 1, 4, 4, 4, 4, 4};
    Py_buffer *v[13];
    for (int i = 0; i < 13; i++)
        if (!(v[i] = next_buf(b->bufs, &b->n_bufs, o[i], what[i], fmt[i], size[i], 0))) goto fail;
    gd_pd *pd = &b->pd;
    Py_ssize_t R = v[4]->shape[0];
    pd->n_rules = (int32_t)R;
    pd->max_depth = max_depth;
    pd->blob = v[0]->buf;
    pd->offsets = v[1]->buf;
    pd->trans_off = v[2]->buf;
    pd->trans = v[3]->buf;
    pd->n_cls = v[4]->buf;
    pd->state_off = v[5]->buf;
    pd->byte_class = v[6]->buf;
    pd->accepting = v[7]->buf;
    pd->call_off = v[8]->buf;
    pd->call_x = v[9]->buf;
    pd->call_t = v[10]->buf;
    pd->spec_off = v[11]->buf;
    pd->spec_t = v[12]->buf;
    if (v[1]->shape[0] < 1) bad = "offsets: n_tokens + 1 entries";
    else if (((const uint64_t *)v[1]->buf)[v[1]->shape[0] - 1] > (uint64_t)v[0]->shape[0]) bad = "offsets past the blob";
    else if (R < 1 || v[2]->shape[0] != R || v[5]->shape[0] != R + 1 || v[6]->shape[0] != 256 * R)
        bad = "trans_off, n_cls, state_off and byte_class: one per rule (state_off: + 1, byte_class: 256 each)";
    else if (max_depth < 1) bad = "max_depth: at least 1";
    if (bad) goto fail;
    pd->n_tokens = (uint32_t)(v[1]->shape[0] - 1);
    for (Py_ssize_t t = 0; t + 1 < v[1]->shape[0] && !bad; t++)
        if (pd->offsets[t] > pd->offsets[t + 1]) bad = "offsets: not increasing";
    int32_t total = pd->state_off[R];
    if (!bad && (pd->state_off[0] != 0 || v[7]->shape[0] != total || v[8]->shape[0] != (Py_ssize_t)total + 1 ||
                 v[11]->shape[0] != (Py_ssize_t)total + 1))
        bad = "accepting, call_off and spec_off: one per state of all rules (call_off, spec_off: + 1)";
    for (Py_ssize_t r = 0; r < R && !bad; r++) {
        int32_t n = pd->state_off[r + 1] - pd->state_off[r], nc = pd->n_cls[r];
        if (n < 1 || nc < 1 || nc > 256) { bad = "a rule without states or with 0 or more than 256 classes"; break; }
        for (int x = 0; x < 256; x++)
            if (pd->byte_class[r * 256 + x] >= nc) { bad = "byte_class: a class not below n_cls"; break; }
        if (pd->trans_off[r] < 0 || pd->trans_off[r] + (int64_t)n * nc > (int64_t)v[3]->shape[0]) {
            bad = "trans: a rule's table past the array";
            break;
        }
        const int32_t *tr = pd->trans + pd->trans_off[r];
        for (int64_t k = 0; k < (int64_t)n * nc; k++)
            if (tr[k] < -1 || tr[k] >= n) { bad = "trans: a target out of range"; break; }
        for (int32_t s = 0; s < n && !bad; s++) {
            int32_t g = pd->state_off[r] + s;
            if (pd->call_off[g] < 0 || pd->call_off[g] > pd->call_off[g + 1] || pd->call_off[g + 1] > v[9]->shape[0] ||
                v[9]->shape[0] != v[10]->shape[0]) {
                bad = "call_off: not increasing within call_x / call_t";
                break;
            }
            for (int32_t j = pd->call_off[g]; j < pd->call_off[g + 1]; j++)
                if (pd->call_x[j] < 0 || pd->call_x[j] >= R || pd->call_t[j] < 0 || pd->call_t[j] >= n) {
                    bad = "call_x / call_t: out of range";
                    break;
                }
            if (bad) break;
            if (pd->spec_off[g] < 0 || pd->spec_off[g] > pd->spec_off[g + 1] || pd->spec_off[g + 1] > v[12]->shape[0]) {
                bad = "spec_off: not increasing within spec_t";
                break;
            }
            for (int32_t j = pd->spec_off[g]; j < pd->spec_off[g + 1]; j++)
                if (pd->spec_t[j] < 0 || pd->spec_t[j] >= n) {
                    bad = "spec_t: out of range";
                    break;
                }
        }
    }
    if (bad) goto fail;
    PyObject *ret = PyCapsule_New(b, PD_CAPSULE, pd_destroy);
    if (!ret) pd_free(b);
    return ret;
fail:
    if (bad) PyErr_Format(PyExc_ValueError, "pd_new: %s", bad);
    pd_free(b);
    return NULL;
}


/* pd_live(pd, forbidden_u8, live_out_u8): see gd_pd_live. Releases the GIL. */
static PyObject *py_pd_live(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *of, *ol;
    if (!PyArg_ParseTuple(args, "OOO", &cap, &of, &ol)) return NULL;
    pd_box *b = PyCapsule_GetPointer(cap, PD_CAPSULE);
    if (!b) return NULL;
    Py_buffer f, l;
    if (get_buf(of, &f, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "forbidden", 'B', 1) < 0) return NULL;
    if (get_buf(ol, &l, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE, "live", 'B', 1) < 0) {
        PyBuffer_Release(&f);
        return NULL;
    }
    PyObject *ret = NULL;
    if (f.shape[0] != b->pd.n_rules || l.shape[0] != b->pd.state_off[b->pd.n_rules]) {
        PyErr_SetString(PyExc_ValueError, "pd_live: forbidden: one per rule, live: one per state of all rules");
    } else {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = gd_pd_live(&b->pd, f.buf, l.buf);
        Py_END_ALLOW_THREADS
        if (rc) PyErr_NoMemory();
        else ret = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&f);
    PyBuffer_Release(&l);
    return ret;
}

#define PD_MASKER_CAPSULE "decoding._native.pushdown_masker"

typedef struct {
    gd_pd_masker *pm;
    size_t n_tokens;
    Py_ssize_t n_rules, total_states;
    PyObject *keep; /* the arguments: the pd and profiles capsules and the arrays stay alive */
    Py_buffer bufs[2];
    int n_bufs;
} pd_masker_box;

static void pd_masker_free(pd_masker_box *b) {
    gd_pd_masker_free(b->pm);
    release_bufs(b->bufs, b->n_bufs, b->keep);
    PyMem_Free(b);
}

static void pd_masker_destroy(PyObject *cap) { pd_masker_free(PyCapsule_GetPointer(cap, PD_MASKER_CAPSULE)); }

/* a saturated set: uint8, one 0/1 per rule (released by the caller on success) */
static int get_sat(pd_masker_box *b, PyObject *o, Py_buffer *v) {
    if (get_buf(o, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "sat", 'B', 1) < 0) return -1;
    if (v->shape[0] != b->n_rules) {
        PyErr_SetString(PyExc_ValueError, "sat: one byte per rule");
        PyBuffer_Release(v);
        return -1;
    }
    for (Py_ssize_t r = 0; r < v->shape[0]; r++)
        if (((const uint8_t *)v->buf)[r] > 1) {
            PyErr_SetString(PyExc_ValueError, "sat: 0 or 1 per rule");
            PyBuffer_Release(v);
            return -1;
        }
    return 0;
}

/* pd_masker(pd, exit_id_i32, exit_set_u8, profiles) -> capsule (see gd_pd_masker_new) */
static PyObject *py_pd_masker(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ocap, *oid, *oset, *opro;
    if (!PyArg_ParseTuple(args, "OOOO", &ocap, &oid, &oset, &opro)) return NULL;
    pd_box *pb = PyCapsule_GetPointer(ocap, PD_CAPSULE);
    if (!pb) return NULL;
    profiles_box *prof = PyCapsule_GetPointer(opro, PROFILES_CAPSULE);
    if (!prof) return NULL;
    pd_masker_box *b = PyMem_Calloc(1, sizeof(pd_masker_box));
    if (!b) return PyErr_NoMemory();
    b->keep = Py_NewRef(args);
    b->n_tokens = prof->n_tokens;
    b->n_rules = pb->pd.n_rules;
    b->total_states = pb->pd.state_off[pb->pd.n_rules];
    const char *bad = NULL;
    Py_buffer *vi, *vs;
    if (!(vi = next_buf(b->bufs, &b->n_bufs, oid, "exit_id", 'i', 4, 0)) ||
        !(vs = next_buf(b->bufs, &b->n_bufs, oset, "exit_set", 'B', 1, 0)))
        goto fail;
    int32_t total = pb->pd.state_off[pb->pd.n_rules], n_sets = (int32_t)(vs->shape[0] / 32);
    if (prof->n_tokens != pb->pd.n_tokens) bad = "the profiles' vocabulary is not the pd's";
    else if (vi->shape[0] != total) bad = "exit_id: one per state of all rules";
    else if (vs->shape[0] % 32) bad = "exit_set: 32 bytes per set";
    for (int32_t g = 0; g < total && !bad; g++)
        if (((const int32_t *)vi->buf)[g] < -1 || ((const int32_t *)vi->buf)[g] >= n_sets) bad = "exit_id: out of range";
    if (bad) goto fail;
    b->pm = gd_pd_masker_new(&pb->pd, vi->buf, vs->buf, n_sets, prof->trie, prof->prof, prof->n,
                             (prof->n_tokens + 31) / 32);
    if (!b->pm) {
        PyErr_NoMemory();
        goto fail;
    }
    PyObject *ret = PyCapsule_New(b, PD_MASKER_CAPSULE, pd_masker_destroy);
    if (!ret) pd_masker_free(b);
    return ret;
fail:
    if (bad) PyErr_Format(PyExc_ValueError, "pd_masker: %s", bad);
    pd_masker_free(b);
    return NULL;
}

/* pd_check(pd_masker, stacks_i32, ids_u32, mask_u32, undecided_u32) -> number of undecided ids (see
 * gd_pd_check). Releases the GIL. */
static PyObject *py_pd_check(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *os, *oi, *om, *ou;
    if (!PyArg_ParseTuple(args, "OOOOO", &cap, &os, &oi, &om, &ou)) return NULL;
    pd_masker_box *b = PyCapsule_GetPointer(cap, PD_MASKER_CAPSULE);
    if (!b) return NULL;
    Py_buffer v[4];
    int n = 0;
    PyObject *ret = NULL;
    if (get_buf(os, &v[n], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "stacks", 'i', 4) < 0) goto out;
    n++;
    if (get_buf(oi, &v[n], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "ids", 'I', 4) < 0) goto out;
    n++;
    if (get_words(om, &v[n], 1, "mask") < 0) goto out;
    n++;
    if (get_words(ou, &v[n], 1, "undecided") < 0) goto out;
    n++;
    if (v[3].shape[0] < v[1].shape[0]) {
        PyErr_SetString(PyExc_ValueError, "pd_check: undecided must hold as many ids as ids");
        goto out;
    }
    size_t nu = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = gd_pd_check(b->pm, v[0].buf, (size_t)v[0].shape[0], v[1].buf, (size_t)v[1].shape[0], v[2].buf,
                     (size_t)v[2].shape[0], v[3].buf, &nu);
    Py_END_ALLOW_THREADS
    if (rc == -1) PyErr_SetString(PyExc_ValueError, "pd_check: a stack or an id out of range");
    else if (rc) PyErr_NoMemory();
    else ret = PyLong_FromSize_t(nu);
out:
    for (int i = 0; i < n; i++) PyBuffer_Release(&v[i]);
    return ret;
}

/* pd_run(pd_masker, stacks_i32, data_bytes, out_i32) -> (rc, n): see gd_pd_run (rc 0: out[:n] the
 * stacks after the bytes; 1 or 2: step them in Python). Releases the GIL. */
static PyObject *py_pd_run(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *os, *oo;
    const char *data;
    Py_ssize_t nd;
    if (!PyArg_ParseTuple(args, "OOy#O", &cap, &os, &data, &nd, &oo)) return NULL;
    pd_masker_box *b = PyCapsule_GetPointer(cap, PD_MASKER_CAPSULE);
    if (!b) return NULL;
    Py_buffer vs, vo;
    if (get_buf(os, &vs, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "stacks", 'i', 4) < 0) return NULL;
    if (get_buf(oo, &vo, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE, "out", 'i', 4) < 0) {
        PyBuffer_Release(&vs);
        return NULL;
    }
    size_t n = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = gd_pd_run(b->pm, vs.buf, (size_t)vs.shape[0], (const uint8_t *)data, (size_t)nd, vo.buf, (size_t)vo.shape[0], &n);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&vs);
    PyBuffer_Release(&vo);
    if (rc == -1) return PyErr_Format(PyExc_ValueError, "pd_run: a stack out of range");
    if (rc < 0) return PyErr_NoMemory();
    return Py_BuildValue("(in)", rc, (Py_ssize_t)n);
}

/* pd_frame_mask(pd_masker, rule, state, sat_u8_or_None, special_ids_u32, loc_out, cand_out, ids_out) ->
 * (more, hash, n, inverted): more: whether cand is not empty (see gd_pd_frame_mask); then loc's digest as state_mask
 * gives it. Releases the GIL; calls on one masker must be serialised. */
static PyObject *py_pd_frame_mask(PyObject *module, PyObject *args) {
    PyObject *cap, *osat, *osp, *ol, *oc, *oi;
    int r, s;
    if (!PyArg_ParseTuple(args, "OiiOOOOO", &cap, &r, &s, &osat, &osp, &ol, &oc, &oi)) return NULL;
    pd_masker_box *b = PyCapsule_GetPointer(cap, PD_MASKER_CAPSULE);
    if (!b) return NULL;
    Py_buffer v[5];
    int n = 0, rc = 0, inverted = 0;
    const uint8_t *sat = NULL;
    PyObject *ret = NULL;
    if (osat != Py_None) {
        if (get_sat(b, osat, &v[4]) < 0) return NULL;
        sat = v[4].buf;
    }
    if (get_words(osp, &v[n], 0, "special_ids") < 0) goto out;
    n++;
    if (get_words(ol, &v[n], 1, "loc") < 0) goto out;
    n++;
    if (get_words(oc, &v[n], 1, "cand") < 0) goto out;
    n++;
    if (get_words(oi, &v[n], 1, "ids") < 0) goto out;
    n++;
    size_t nwords = (b->n_tokens + 31) / 32, cap_ids = (size_t)v[3].shape[0], c = 0;
    uint64_t h = 0;
    if (v[1].shape[0] != (Py_ssize_t)nwords || v[2].shape[0] != (Py_ssize_t)nwords) {
        PyErr_SetString(PyExc_ValueError, "pd_frame_mask: loc and cand must be nwords words");
        goto out;
    }
    const gd_kernels *k = state_of(module)->kernels;
    Py_BEGIN_ALLOW_THREADS
    rc = gd_pd_frame_mask(k, b->pm, r, s, sat, v[0].buf, (size_t)v[0].shape[0], v[1].buf, v[2].buf);
    if (rc >= 0) {
        c = gd_mask_digest(v[1].buf, b->n_tokens, &h, v[3].buf, cap_ids);
        if (c > cap_ids && b->n_tokens - c <= cap_ids) {
            c = gd_mask_clear_ids(v[1].buf, b->n_tokens, v[3].buf, cap_ids);
            inverted = 1;
        }
    }
    Py_END_ALLOW_THREADS
    if (rc == -1) PyErr_Format(PyExc_ValueError, "pd_frame_mask: rule %d state %d out of range", r, s);
    else if (rc < 0) PyErr_NoMemory();
    else ret = Py_BuildValue("OKni", rc ? Py_True : Py_False, (unsigned long long)h, (Py_ssize_t)c, inverted);
out:
    for (int i = 0; i < n; i++) PyBuffer_Release(&v[i]);
    if (sat) PyBuffer_Release(&v[4]);
    return ret;
}

/* pd_masker_bytes(pd_masker) -> bytes (see gd_pd_masker_bytes) */
static PyObject *py_pd_masker_bytes(PyObject *self, PyObject *arg) {
    (void)self;
    pd_masker_box *b = PyCapsule_GetPointer(arg, PD_MASKER_CAPSULE);
    if (!b) return NULL;
    return PyLong_FromSize_t(gd_pd_masker_bytes(b->pm));
}

/* pd_masker_live(pd_masker, sat_u8_or_None, live_out_u8): see gd_pd_masker_live. */
static PyObject *py_pd_masker_live(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *osat, *ol;
    if (!PyArg_ParseTuple(args, "OOO", &cap, &osat, &ol)) return NULL;
    pd_masker_box *b = PyCapsule_GetPointer(cap, PD_MASKER_CAPSULE);
    if (!b) return NULL;
    Py_buffer vs, vl;
    const uint8_t *sat = NULL;
    if (osat != Py_None) {
        if (get_sat(b, osat, &vs) < 0) return NULL;
        sat = vs.buf;
    }
    PyObject *ret = NULL;
    if (get_buf(ol, &vl, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE, "live", 'B', 1) == 0) {
        if (vl.shape[0] != b->total_states) PyErr_SetString(PyExc_ValueError, "pd_masker_live: live: one per state of all rules");
        else if (gd_pd_masker_live(b->pm, sat, vl.buf)) PyErr_NoMemory();
        else ret = Py_NewRef(Py_None);
        PyBuffer_Release(&vl);
    }
    if (sat) PyBuffer_Release(&vs);
    return ret;
}

/* GD_DFA_* error code -> Python exception (the caller words LimitError from these). */
static PyObject *dfa_error(int rc, const char *what) {
    switch (rc) {
    case GD_DFA_NOMEM: return PyErr_NoMemory();
    case GD_DFA_LIMIT: return PyErr_Format(PyExc_OverflowError, "%s: more than max_states states", what);
    case GD_DFA_BYTES: return PyErr_Format(PyExc_OverflowError, "%s: more than max_bytes bytes", what);
    case GD_DFA_TIMEOUT: return PyErr_Format(PyExc_TimeoutError, "%s: time budget spent", what);
    default: return PyErr_Format(PyExc_ValueError, "%s: arrays out of range", what);
    }
}

/* (trans_i32_bytes, accepting_u8_bytes) of a table the core built (freed here), or the
 * exception of a failed build. */
static PyObject *table_result(int rc, gd_dfa_table *t, const char *what) {
    if (rc != GD_DFA_OK) return dfa_error(rc, what);
    PyObject *r = Py_BuildValue("(y#y#)", (const char *)t->trans, (Py_ssize_t)t->n_states * t->nsym * 4,
                                (const char *)t->accepting, (Py_ssize_t)t->n_states);
    gd_dfa_table_free(t);
    return r;
}

static PyObject *py_nfa_determinize(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[4];
    int start, end, nsym, max_states;
    double budget;
    unsigned long long max_bytes = 0; /* optional: 0 is no bound */
    if (!PyArg_ParseTuple(args, "OOOOiiiid|K", &o[0], &o[1], &o[2], &o[3], &start, &end, &nsym, &max_states,
                          &budget, &max_bytes))
        return NULL;
    const char *const names[4] = {"eps_off", "eps_tgt", "mv_off", "mv"};
    Py_buffer b[4];
    for (int i = 0; i < 4; i++)
        if (get_buf(o[i], &b[i], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, names[i], 'i', 4) < 0) {
            while (i--) PyBuffer_Release(&b[i]);
            return NULL;
        }
    Py_ssize_t n = b[0].shape[0] - 1;
    const int32_t *eo = b[0].buf, *mo = b[2].buf;
    PyObject *ret = NULL;
    if (n < 1 || n > INT32_MAX - 1 || b[2].shape[0] != n + 1 || b[1].shape[0] != eo[n] ||
        b[3].shape[0] != 2 * (Py_ssize_t)mo[n]) {
        PyErr_SetString(PyExc_ValueError, "nfa_determinize: eps_off and mv_off need n+1 entries, "
                                          "eps_tgt eps_off[n] and mv 2*mv_off[n]");
    } else {
        gd_dfa_table t;
        int rc;
        Py_BEGIN_ALLOW_THREADS /* re-entrant (no global state); buffers stay held */
        rc = gd_nfa_determinize((int32_t)n, eo, b[1].buf, mo, b[3].buf, start, end, nsym, max_states, (size_t)max_bytes,
                                budget, &t);
        Py_END_ALLOW_THREADS
        ret = table_result(rc, &t, "nfa_determinize");
    }
    for (int i = 0; i < 4; i++) PyBuffer_Release(&b[i]);
    return ret;
}

/* nfa_determinize_coo(..., max_bytes, minimal=True): gd_nfa_minimal_coo.  Returns (0, live,
 * byte_class u16 bytes, n_classes, n_states, table bytes, elem_bytes, accepting u8 bytes):
 * with live the minimal DFA (int16 cells when elem_bytes is 2, else int32), without it the
 * subset construction's int32 table (to be trimmed first); or (code, phase) for a limit
 * (GD_DFA_LIMIT, GD_DFA_BYTES) or the deadline (GD_DFA_TIMEOUT), phase 0 in the subset
 * construction, 1 in the minimisation; MemoryError / ValueError otherwise. */
static PyObject *minimal_coo(int n, int start, int end, Py_buffer *b, int n_specials, int max_states, double budget,
                             unsigned long long max_bytes) {
    gd_min_table t;
    uint16_t bc[256];
    int32_t ncls;
    int rc, phase;
    Py_BEGIN_ALLOW_THREADS /* re-entrant (no global state); buffers stay held */
    rc = gd_nfa_minimal_coo(n, start, end, (size_t)b[0].shape[0], b[0].buf, b[1].buf, (size_t)b[2].shape[0], b[2].buf,
                            b[3].buf, b[4].buf, b[5].buf, (size_t)b[6].shape[0], b[6].buf, b[7].buf, b[8].buf,
                            n_specials, max_states, (size_t)max_bytes, budget, bc, &ncls, &t, &phase);
    Py_END_ALLOW_THREADS
    if (rc == GD_DFA_LIMIT || rc == GD_DFA_BYTES || rc == GD_DFA_TIMEOUT) return Py_BuildValue("(ii)", rc, phase);
    if (rc != GD_DFA_OK) return dfa_error(rc, "nfa_determinize_coo");
    PyObject *ret = Py_BuildValue("(iiy#iiy#iy#)", 0, (int)t.live, (const char *)bc, (Py_ssize_t)sizeof bc, (int)ncls,
                                  (int)t.n_states, (const char *)t.trans,
                                  (Py_ssize_t)t.n_states * t.nsym * t.elem_bytes, (int)t.elem_bytes,
                                  (const char *)t.accepting, (Py_ssize_t)t.n_states);
    gd_min_table_free(&t);
    return ret;
}

static PyObject *py_nfa_determinize_coo(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[9];
    int n, start, end, n_specials, max_states;
    double budget;
    unsigned long long max_bytes = 0; /* optional: 0 is no bound */
    int minimal = 0;                   /* optional: gd_nfa_minimal_coo instead (see below) */
    if (!PyArg_ParseTuple(args, "iiiOOOOOOOOOiid|Kp", &n, &start, &end, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5],
                          &o[6], &o[7], &o[8], &n_specials, &max_states, &budget, &max_bytes, &minimal))
        return NULL;
    const char *const names[9] = {"eps_src", "eps_tgt", "e_src", "e_lo", "e_hi", "e_tgt", "sp_src", "sp_sym", "sp_tgt"};
    const char fmts[9] = {'i', 'i', 'i', 'B', 'B', 'i', 'i', 'i', 'i'};
    Py_buffer b[9];
    for (int i = 0; i < 9; i++)
        if (get_buf(o[i], &b[i], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, names[i], fmts[i], fmts[i] == 'B' ? 1 : 4) < 0) {
            while (i--) PyBuffer_Release(&b[i]);
            return NULL;
        }
    PyObject *ret = NULL;
    if (b[1].shape[0] != b[0].shape[0] || b[3].shape[0] != b[2].shape[0] || b[4].shape[0] != b[2].shape[0] ||
        b[5].shape[0] != b[2].shape[0] || b[7].shape[0] != b[6].shape[0] || b[8].shape[0] != b[6].shape[0]) {
        PyErr_SetString(PyExc_ValueError, "nfa_determinize_coo: the arrays of one edge list differ in length");
    } else if (minimal) {
        ret = minimal_coo(n, start, end, b, n_specials, max_states, budget, max_bytes);
    } else {
        gd_dfa_table t;
        uint16_t bc[256];
        int32_t ncls;
        int rc;
        Py_BEGIN_ALLOW_THREADS /* re-entrant (no global state); buffers stay held */
        rc = gd_nfa_determinize_coo(n, start, end, (size_t)b[0].shape[0], b[0].buf, b[1].buf, (size_t)b[2].shape[0],
                                    b[2].buf, b[3].buf, b[4].buf, b[5].buf, (size_t)b[6].shape[0], b[6].buf, b[7].buf,
                                    b[8].buf, n_specials, max_states, (size_t)max_bytes, budget, bc, &ncls, &t);
        Py_END_ALLOW_THREADS
        if (rc != GD_DFA_OK) {
            dfa_error(rc, "nfa_determinize_coo");
        } else {
            ret = Py_BuildValue("(y#iy#y#)", (const char *)bc, (Py_ssize_t)sizeof bc, (int)ncls,
                                (const char *)t.trans, (Py_ssize_t)t.n_states * t.nsym * 4,
                                (const char *)t.accepting, (Py_ssize_t)t.n_states);
            gd_dfa_table_free(&t);
        }
    }
    for (int i = 0; i < 9; i++) PyBuffer_Release(&b[i]);
    return ret;
}

/* ---- lazy DFA (gd_lazy): a capsule; every call holds the GIL (gd_lazy is not thread-safe) */
static void lazy_destroy(PyObject *cap) { gd_lazy_free(PyCapsule_GetPointer(cap, LAZY_CAPSULE)); }

static gd_lazy *lazy_of(PyObject *cap) { return PyCapsule_GetPointer(cap, LAZY_CAPSULE); }

/* OverflowError/MemoryError for the first failed expansion of L */
static PyObject *lazy_failed(gd_lazy *L, const char *what) {
    gd_lazy_stats st;
    gd_lazy_info(L, &st);
    return dfa_error(st.err ? st.err : GD_DFA_NOMEM, what);
}

/* lazy_new(n, start, end, eps_src, eps_tgt, e_src, e_lo, e_hi, e_tgt, sp_src, sp_sym, sp_tgt, n_specials,
 *          byte_ok_u8_or_None, max_states, max_bytes) -> capsule (ValueError "empty" if the start cannot
 *          reach the end over usable symbols) */
static PyObject *py_lazy_new(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[9], *ook;
    int n, start, end, n_specials, max_states;
    unsigned long long max_bytes;
    if (!PyArg_ParseTuple(args, "iiiOOOOOOOOOiOiK", &n, &start, &end, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5],
                          &o[6], &o[7], &o[8], &n_specials, &ook, &max_states, &max_bytes))
        return NULL;
    const char *const names[9] = {"eps_src", "eps_tgt", "e_src", "e_lo", "e_hi", "e_tgt", "sp_src", "sp_sym", "sp_tgt"};
    const char fmts[9] = {'i', 'i', 'i', 'B', 'B', 'i', 'i', 'i', 'i'};
    Py_buffer b[9], ok;
    int has_ok = ook != Py_None;
    for (int i = 0; i < 9; i++)
        if (get_buf(o[i], &b[i], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, names[i], fmts[i], fmts[i] == 'B' ? 1 : 4) < 0) {
            while (i--) PyBuffer_Release(&b[i]);
            return NULL;
        }
    if (has_ok && get_buf(ook, &ok, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "byte_ok", 'B', 1) < 0) {
        for (int i = 0; i < 9; i++) PyBuffer_Release(&b[i]);
        return NULL;
    }
    PyObject *ret = NULL;
    if (b[1].shape[0] != b[0].shape[0] || b[3].shape[0] != b[2].shape[0] || b[4].shape[0] != b[2].shape[0] ||
        b[5].shape[0] != b[2].shape[0] || b[7].shape[0] != b[6].shape[0] || b[8].shape[0] != b[6].shape[0]) {
        PyErr_SetString(PyExc_ValueError, "lazy_new: the arrays of one edge list differ in length");
    } else if (has_ok && ok.shape[0] != 256) {
        PyErr_SetString(PyExc_ValueError, "lazy_new: byte_ok must have 256 entries");
    } else {
        int rc;
        gd_lazy *L = gd_lazy_new_coo(n, start, end, (size_t)b[0].shape[0], b[0].buf, b[1].buf, (size_t)b[2].shape[0],
                                     b[2].buf, b[3].buf, b[4].buf, b[5].buf, (size_t)b[6].shape[0], b[6].buf,
                                     b[7].buf, b[8].buf, n_specials, has_ok ? ok.buf : NULL, max_states,
                                     (size_t)max_bytes, &rc);
        if (!L && rc == GD_DFA_EMPTY)
            PyErr_SetString(PyExc_ValueError, "lazy_new: empty: the start cannot reach the end over usable bytes");
        else if (!L)
            dfa_error(rc, "lazy_new");
        else if (!(ret = PyCapsule_New(L, LAZY_CAPSULE, lazy_destroy)))
            gd_lazy_free(L);
    }
    for (int i = 0; i < 9; i++) PyBuffer_Release(&b[i]);
    if (has_ok) PyBuffer_Release(&ok);
    return ret;
}

/* lazy_info(cap) -> (n_states, n_expanded, n_classes, nsym, bytes, byte_class_u16_bytes) */
static PyObject *py_lazy_info(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    if (!PyArg_ParseTuple(args, "O", &cap)) return NULL;
    gd_lazy *L = lazy_of(cap);
    if (!L) return NULL;
    gd_lazy_stats st;
    gd_lazy_info(L, &st);
    return Py_BuildValue("(iiiiny#)", st.n_states, st.n_expanded, st.n_classes, st.nsym, (Py_ssize_t)st.bytes,
                         (const char *)st.byte_class, (Py_ssize_t)sizeof st.byte_class);
}

/* lazy_row(cap, state, out_i32[nsym]): the row of `state` (made if needed) */
static PyObject *py_lazy_row(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *oout;
    int state;
    if (!PyArg_ParseTuple(args, "OiO", &cap, &state, &oout)) return NULL;
    gd_lazy *L = lazy_of(cap);
    if (!L) return NULL;
    if (state < 0 || (size_t)state >= gd_lazy_n_states(L))
        return PyErr_Format(PyExc_ValueError, "lazy_row: state %d out of range", state);
    Py_buffer out;
    if (get_buf(oout, &out, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE, "out", 'i', 4) < 0) return NULL;
    int32_t nsym = gd_lazy_nsym(L);
    PyObject *ret = NULL;
    if (out.shape[0] != nsym) {
        PyErr_Format(PyExc_ValueError, "lazy_row: out must have nsym=%d entries", nsym);
    } else {
        const int32_t *row = gd_lazy_row(L, state);
        if (!row) lazy_failed(L, "lazy_row");
        else {
            memcpy(out.buf, row, sizeof(int32_t) * (size_t)nsym);
            ret = Py_None;
            Py_INCREF(ret);
        }
    }
    PyBuffer_Release(&out);
    return ret;
}

/* lazy_run(cap, state, data_bytes) -> the state after the bytes (-1: no transition) */
static PyObject *py_lazy_run(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    int state;
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "Oiy*", &cap, &state, &data)) return NULL;
    gd_lazy *L = lazy_of(cap);
    if (!L) { PyBuffer_Release(&data); return NULL; }
    if (state < 0 || (size_t)state >= gd_lazy_n_states(L)) {
        PyBuffer_Release(&data);
        return PyErr_Format(PyExc_ValueError, "lazy_run: state %d out of range", state);
    }
    const uint16_t *bc = gd_lazy_byte_class(L);
    const uint8_t *p = data.buf;
    int32_t s = state;
    for (Py_ssize_t i = 0; i < data.len && s >= 0; i++) s = gd_lazy_step(L, s, bc[p[i]]);
    PyBuffer_Release(&data);
    if (s < -1) return lazy_failed(L, "lazy_run");
    return PyLong_FromLong((long)s);
}

/* lazy_step(cap, state, symbol) -> next state (-1: none) */
static PyObject *py_lazy_step(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    int state, sym;
    if (!PyArg_ParseTuple(args, "Oii", &cap, &state, &sym)) return NULL;
    gd_lazy *L = lazy_of(cap);
    if (!L) return NULL;
    if (state < 0 || (size_t)state >= gd_lazy_n_states(L) || sym < 0 || sym >= gd_lazy_nsym(L))
        return PyErr_Format(PyExc_ValueError, "lazy_step: state or symbol out of range");
    int32_t s = gd_lazy_step(L, state, sym);
    if (s < -1) return lazy_failed(L, "lazy_step");
    return PyLong_FromLong((long)s);
}

/* lazy_state(cap, state) -> (accepting, fewest usable moves to acceptance) */
static PyObject *py_lazy_state(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    int state;
    if (!PyArg_ParseTuple(args, "Oi", &cap, &state)) return NULL;
    gd_lazy *L = lazy_of(cap);
    if (!L) return NULL;
    if (state < 0 || (size_t)state >= gd_lazy_n_states(L))
        return PyErr_Format(PyExc_ValueError, "lazy_state: state %d out of range", state);
    return Py_BuildValue("(Ni)", PyBool_FromLong(gd_lazy_accepting(L, state)), (int)gd_lazy_min_moves(L, state));
}

/* lazy_walk(trie, classes_u8[256], cap, state, mask, next_state=None, plain=None) -> allowed
 * plain: (node_plain_u8, row_off_i32, pair_cls_u8, pair_next_i16, memo_slot) */
static PyObject *py_lazy_walk(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *tcap, *ocls, *cap, *omask, *onext = Py_None, *oplain = Py_None, *ret = NULL;
    int state, slot = -1;
    if (!PyArg_ParseTuple(args, "OOOiO|OO", &tcap, &ocls, &cap, &state, &omask, &onext, &oplain)) return NULL;
    gd_trie *t = PyCapsule_GetPointer(tcap, TRIE_CAPSULE);
    if (!t) return NULL;
    gd_lazy *L = lazy_of(cap);
    if (!L) return NULL;
    Py_buffer cls, mask, next, pb[4];
    int has_next = onext != Py_None, n_plain = 0;
    const char *bad = NULL;
    if (get_buf(ocls, &cls, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "classes", 'B', 1) < 0) return NULL;
    if (get_words(omask, &mask, 1, "mask") < 0) { PyBuffer_Release(&cls); return NULL; }
    if (has_next && get_buf(onext, &next, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE, "next_state", 'i', 4) < 0) {
        PyBuffer_Release(&cls);
        PyBuffer_Release(&mask);
        return NULL;
    }
    gd_walk_opts opts = {-1, NULL, NULL, NULL, NULL, NULL, -1};
    int32_t n_classes = gd_lazy_n_classes(L);
    if (cls.shape[0] != 256) bad = "classes must have 256 entries";
    else if (state < 0 || (size_t)state >= gd_lazy_n_states(L)) bad = "state out of range";
    else if (has_next && next.shape[0] < mask.shape[0] * 32) bad = "next_state must have 32 entries per mask word";
    else {
        for (int b = 0; b < 256 && !bad; b++)
            if (((const uint8_t *)cls.buf)[b] >= n_classes) bad = "classes: a class not below the automaton's";
    }
    if (!bad && oplain != Py_None) {
        const char *const pn[4] = {"node_plain", "row_off", "pair_cls", "pair_next"};
        const char pf[4] = {'B', 'i', 'B', 'h'};
        const Py_ssize_t ps[4] = {1, 4, 1, 2};
        if (!PyTuple_Check(oplain) || PyTuple_GET_SIZE(oplain) != 5) bad = "plain must be a 5-tuple";
        for (; !bad && n_plain < 4; n_plain++)
            if (get_buf(PyTuple_GET_ITEM(oplain, n_plain), &pb[n_plain], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, pn[n_plain],
                        pf[n_plain], ps[n_plain]) < 0)
                break;
        if (!bad && n_plain < 4) goto done; /* the buffer error is set */
        if (!bad) {
            slot = (int)PyLong_AsLong(PyTuple_GET_ITEM(oplain, 4));
            if (slot == -1 && PyErr_Occurred()) goto done;
            if (slot < 0 || slot >= 8) bad = "plain: memo slot must be 0..7";
            else if (pb[0].shape[0] != (Py_ssize_t)gd_trie_nodes(t)) bad = "plain: node_plain must have one byte per trie node";
            else bad = check_pairs(&pb[1], &pb[2], &pb[3], n_classes);
            opts.node_plain = pb[0].buf;
            opts.row_off = pb[1].buf;
            opts.pair_cls = pb[2].buf;
            opts.pair_next = pb[3].buf;
            opts.memo_slot = slot;
        }
    }
    if (bad) {
        PyErr_Format(PyExc_ValueError, "lazy_walk: %s", bad);
    } else {
        size_t k = gd_trie_walk_lazy(t, cls.buf, L, state, mask.buf, (size_t)mask.shape[0],
                                     has_next ? next.buf : NULL, &opts);
        if (k == SIZE_MAX) lazy_failed(L, "lazy_walk");
        else ret = PyLong_FromSize_t(k);
    }
done:
    for (int i = 0; i < n_plain; i++) PyBuffer_Release(&pb[i]);
    PyBuffer_Release(&cls);
    PyBuffer_Release(&mask);
    if (has_next) PyBuffer_Release(&next);
    return ret;
}

/* lazy_plain_chain(row_off_i32, pair_cls_u8, pair_next_i16, cap, state, max_len) (see plain_chain) */
static PyObject *py_lazy_plain_chain(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oro, *ocls, *onext, *cap;
    int state;
    unsigned int max_len;
    if (!PyArg_ParseTuple(args, "OOOOiI", &oro, &ocls, &onext, &cap, &state, &max_len)) return NULL;
    gd_lazy *L = lazy_of(cap);
    if (!L) return NULL;
    Py_buffer ro, cls, nx;
    if (get_buf(oro, &ro, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "row_off", 'i', 4) < 0) return NULL;
    if (get_buf(ocls, &cls, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "pair_cls", 'B', 1) < 0) {
        PyBuffer_Release(&ro);
        return NULL;
    }
    if (get_buf(onext, &nx, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "pair_next", 'h', 2) < 0) {
        PyBuffer_Release(&ro);
        PyBuffer_Release(&cls);
        return NULL;
    }
    const char *bad = check_pairs(&ro, &cls, &nx, gd_lazy_n_classes(L));
    if (!bad && (state < 0 || (size_t)state >= gd_lazy_n_states(L))) bad = "state out of range";
    int64_t k = 0;
    if (!bad) k = gd_plain_chain_lazy(ro.buf, cls.buf, nx.buf, L, state, max_len);
    PyBuffer_Release(&ro);
    PyBuffer_Release(&cls);
    PyBuffer_Release(&nx);
    if (bad) return PyErr_Format(PyExc_ValueError, "lazy_plain_chain: %s", bad);
    if (k == GD_PLAIN_NOMEM) return PyErr_NoMemory();
    return PyLong_FromLongLong((long long)k);
}

static PyObject *py_dfa_bfs(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *otab, *ocol, *onode, *osrc, *odist;
    int nsym, reverse;
    if (!PyArg_ParseTuple(args, "OiOOpOO", &otab, &nsym, &ocol, &onode, &reverse, &osrc, &odist)) return NULL;
    Py_buffer tab, col, node, src, dist;
    int has_col = ocol != Py_None, has_node = onode != Py_None;
    if (get_buf(otab, &tab, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "table", 'i', 4) < 0) return NULL;
    if (has_col && get_buf(ocol, &col, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "col_ok", 'B', 1) < 0) {
        PyBuffer_Release(&tab);
        return NULL;
    }
    if (has_node && get_buf(onode, &node, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "node_ok", 'B', 1) < 0) {
        PyBuffer_Release(&tab);
        if (has_col) PyBuffer_Release(&col);
        return NULL;
    }
    if (get_buf(osrc, &src, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "sources", 'i', 4) < 0) {
        PyBuffer_Release(&tab);
        if (has_col) PyBuffer_Release(&col);
        if (has_node) PyBuffer_Release(&node);
        return NULL;
    }
    if (get_buf(odist, &dist, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE, "dist", 'i', 4) < 0) {
        PyBuffer_Release(&tab);
        if (has_col) PyBuffer_Release(&col);
        if (has_node) PyBuffer_Release(&node);
        PyBuffer_Release(&src);
        return NULL;
    }
    Py_ssize_t n = dist.shape[0];
    PyObject *ret = NULL;
    if (nsym <= 0 || n > INT32_MAX || tab.shape[0] != n * nsym || (has_col && col.shape[0] != nsym) ||
        (has_node && node.shape[0] != n)) {
        PyErr_Format(PyExc_ValueError, "dfa_bfs: table of %zd entries, %zd states (dist), nsym %d, col_ok or "
                     "node_ok of the wrong length", tab.shape[0], n, nsym);
    } else {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = gd_dfa_bfs(tab.buf, (int32_t)n, nsym, has_col ? col.buf : NULL, has_node ? node.buf : NULL, reverse,
                        src.buf, (size_t)src.shape[0], dist.buf);
        Py_END_ALLOW_THREADS
        ret = rc >= 0 ? PyLong_FromLong(rc) : dfa_error(rc, "dfa_bfs");
    }
    PyBuffer_Release(&tab);
    if (has_col) PyBuffer_Release(&col);
    if (has_node) PyBuffer_Release(&node);
    PyBuffer_Release(&src);
    PyBuffer_Release(&dist);
    return ret;
}

static PyObject *py_dfa_prune(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *otab, *oacc, *ocol, *oout, *oouta;
    int nsym;
    if (!PyArg_ParseTuple(args, "OiOOOO", &otab, &nsym, &oacc, &ocol, &oout, &oouta)) return NULL;
    Py_buffer b[5];
    PyObject *o[5] = {otab, oacc, ocol, oout, oouta};
    const char *const names[5] = {"table", "accepting", "col_ok", "out_table", "out_accepting"};
    const char fmts[5] = {'i', 'B', 'B', 'i', 'B'};
    int has_col = ocol != Py_None;
    for (int i = 0; i < 5; i++) {
        if (i == 2 && !has_col) continue;
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (i >= 3 ? PyBUF_WRITABLE : 0);
        if (get_buf(o[i], &b[i], flags, names[i], fmts[i], fmts[i] == 'B' ? 1 : 4) < 0) {
            while (i--)
                if (i != 2 || has_col) PyBuffer_Release(&b[i]);
            return NULL;
        }
    }
    Py_ssize_t n = b[1].shape[0];
    PyObject *ret = NULL;
    if (nsym <= 0 || n < 1 || n > INT32_MAX || b[0].shape[0] != n * nsym || (has_col && b[2].shape[0] != nsym) ||
        b[3].shape[0] < n * nsym || b[4].shape[0] < n) {
        PyErr_Format(PyExc_ValueError, "dfa_prune: table of %zd entries, %zd states, nsym %d, col_ok of the "
                     "wrong length or outputs too small", b[0].shape[0], n, nsym);
    } else {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = gd_dfa_prune(b[0].buf, (int32_t)n, nsym, b[1].buf, has_col ? b[2].buf : NULL, b[3].buf, b[4].buf);
        Py_END_ALLOW_THREADS
        ret = rc >= 0 ? PyLong_FromLong(rc) : dfa_error(rc, "dfa_prune");
    }
    for (int i = 0; i < 5; i++)
        if (i != 2 || has_col) PyBuffer_Release(&b[i]);
    return ret;
}

static PyObject *py_dfa_minimize(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *otab, *oacc, *oblock;
    int nsym;
    double budget;
    if (!PyArg_ParseTuple(args, "OiOOd", &otab, &nsym, &oacc, &oblock, &budget)) return NULL;
    Py_buffer tab, acc, block;
    if (get_buf(otab, &tab, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "table", 'i', 4) < 0) return NULL;
    if (get_buf(oacc, &acc, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "accepting", 'B', 1) < 0) {
        PyBuffer_Release(&tab);
        return NULL;
    }
    if (get_buf(oblock, &block, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE, "block", 'i', 4) < 0) {
        PyBuffer_Release(&tab);
        PyBuffer_Release(&acc);
        return NULL;
    }
    Py_ssize_t n = acc.shape[0];
    PyObject *ret = NULL;
    if (nsym <= 0 || n > INT32_MAX || tab.shape[0] != n * nsym || block.shape[0] != n) {
        PyErr_Format(PyExc_ValueError, "dfa_minimize: table of %zd entries, %zd states, nsym %d, block of %zd",
                     tab.shape[0], n, nsym, block.shape[0]);
    } else {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = gd_dfa_minimize(tab.buf, (int32_t)n, nsym, acc.buf, budget, block.buf);
        Py_END_ALLOW_THREADS
        ret = rc >= 0 ? PyLong_FromLong(rc) : dfa_error(rc, "dfa_minimize");
    }
    PyBuffer_Release(&tab);
    PyBuffer_Release(&acc);
    PyBuffer_Release(&block);
    return ret;
}

static PyObject *py_dfa_product(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[6];
    int nsa, nsb, b_start, keep_b_dead, diff, max_states;
    double budget;
    if (!PyArg_ParseTuple(args, "OiOOiOOOippid", &o[0], &nsa, &o[1], &o[2], &nsb, &o[3], &o[4], &o[5], &b_start,
                          &keep_b_dead, &diff, &max_states, &budget))
        return NULL;
    const char *const names[6] = {"table_a", "accepting_a", "table_b", "accepting_b", "class_a", "class_b"};
    const char fmts[6] = {'i', 'B', 'i', 'B', 'i', 'i'};
    Py_buffer b[6];
    for (int i = 0; i < 6; i++)
        if (get_buf(o[i], &b[i], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, names[i], fmts[i], fmts[i] == 'B' ? 1 : 4) < 0) {
            while (i--) PyBuffer_Release(&b[i]);
            return NULL;
        }
    PyObject *ret = NULL;
    const Py_ssize_t na = b[1].shape[0], nb = b[3].shape[0], ncls = b[4].shape[0];
    if (nsa <= 0 || na > INT32_MAX || b[0].shape[0] != na * nsa || (nb > 0 && (nsb <= 0 || b[2].shape[0] != nb * nsb)) ||
        b[5].shape[0] != ncls || ncls > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "dfa_product: tables, accepting arrays and classes do not fit");
    } else {
        gd_dfa_table t;
        int rc;
        Py_BEGIN_ALLOW_THREADS /* re-entrant (no global state); buffers stay held */
        rc = gd_dfa_product(b[0].buf, (int32_t)na, nsa, b[1].buf, b[2].buf, (int32_t)nb, nsb, b[3].buf, b[4].buf,
                            b[5].buf, (int32_t)ncls, b_start, keep_b_dead, diff, max_states, budget, &t);
        Py_END_ALLOW_THREADS
        ret = table_result(rc, &t, "dfa_product");
    }
    for (int i = 0; i < 6; i++) PyBuffer_Release(&b[i]);
    return ret;
}

static PyObject *py_literal_dfa(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oblob, *ooff;
    if (!PyArg_ParseTuple(args, "OO", &oblob, &ooff)) return NULL;
    Py_buffer blob, off;
    if (get_buf(oblob, &blob, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "blob", 'B', 1) < 0) return NULL;
    if (get_buf(ooff, &off, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "offsets", 'q', 8) < 0) {
        PyBuffer_Release(&blob);
        return NULL;
    }
    PyObject *ret = NULL;
    const Py_ssize_t n = off.shape[0] - 1;
    const int64_t *o = off.buf;
    if (n < 0 || n > INT32_MAX || o[n] > (int64_t)blob.len) {
        PyErr_SetString(PyExc_ValueError, "literal_dfa: offsets do not fit the blob");
    } else {
        gd_literal_dfa d;
        int rc;
        Py_BEGIN_ALLOW_THREADS /* re-entrant (no global state); buffers stay held */
        rc = gd_literal_dfa_build(blob.buf, o, (int32_t)n, &d);
        Py_END_ALLOW_THREADS
        if (rc == GD_DFA_INVALID) {
            PyErr_SetString(PyExc_ValueError, "literal_dfa: offsets decrease, the words are not strictly "
                                              "increasing, or they are too long");
        } else if (rc != GD_DFA_OK) {
            dfa_error(rc, "literal_dfa");
        } else {
            const int32_t m = d.off[d.n_states];
            ret = Py_BuildValue("(y#y#y#y#)", (const char *)d.off, (Py_ssize_t)(d.n_states + 1) * 4,
                                (const char *)d.lab, (Py_ssize_t)m, (const char *)d.tgt, (Py_ssize_t)m * 4,
                                (const char *)d.final, (Py_ssize_t)d.n_states);
            gd_literal_dfa_free(&d);
        }
    }
    PyBuffer_Release(&blob);
    PyBuffer_Release(&off);
    return ret;
}

static PyObject *py_impl(PyObject *self, PyObject *noargs) {
    (void)noargs;
    return PyUnicode_FromString(gd_impl_name(gd_kernels_impl(state_of(self)->kernels)));
}

static PyObject *py_impl_supported(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
    int i = gd_impl_from_name(name);
    return PyBool_FromLong(i >= 0 && gd_impl_supported(i));
}

static PyObject *py_set_impl(PyObject *self, PyObject *args) {
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
    const gd_kernels *k = gd_kernels_for(gd_impl_from_name(name));
    if (!k) return PyErr_Format(PyExc_ValueError, "kernel implementation '%s' is not available on this CPU", name);
    state_of(self)->kernels = k;
    Py_RETURN_NONE;
}

/* dfa_trim / dfa_minimize_table: the trimming and the minimisation with their result table
 * made here, and not made when nothing changes (the caller keeps its table). */
static PyObject *py_dfa_trim(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *otab, *oacc, *ocol;
    int nsym;
    if (!PyArg_ParseTuple(args, "OiOO", &otab, &nsym, &oacc, &ocol)) return NULL;
    Py_buffer tab, acc, col;
    int has_col = ocol != Py_None;
    if (get_buf(otab, &tab, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "table", 'i', 4) < 0) return NULL;
    if (get_buf(oacc, &acc, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "accepting", 'B', 1) < 0) {
        PyBuffer_Release(&tab);
        return NULL;
    }
    if (has_col && get_buf(ocol, &col, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "col_ok", 'B', 1) < 0) {
        PyBuffer_Release(&tab);
        PyBuffer_Release(&acc);
        return NULL;
    }
    Py_ssize_t n = acc.shape[0];
    PyObject *ret = NULL;
    int32_t *newnum = NULL;
    if (nsym <= 0 || n < 1 || n > INT32_MAX || tab.shape[0] != n * nsym || (has_col && col.shape[0] != nsym)) {
        PyErr_Format(PyExc_ValueError, "dfa_trim: table of %zd entries, %zd states, nsym %d, or col_ok of the "
                     "wrong length", tab.shape[0], n, nsym);
        goto out;
    }
    newnum = PyMem_RawMalloc(sizeof(int32_t) * (size_t)n);
    if (!newnum) {
        PyErr_NoMemory();
        goto out;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = gd_dfa_prune_map(tab.buf, (int32_t)n, nsym, acc.buf, has_col ? col.buf : NULL, newnum);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        dfa_error(rc, "dfa_trim");
        goto out;
    }
    if (rc == 0 || rc == n) {
        ret = Py_BuildValue("(iOO)", rc, Py_None, Py_None);
        goto out;
    }
    PyObject *tb = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)rc * nsym * 4);
    PyObject *ab = tb ? PyBytes_FromStringAndSize(NULL, rc) : NULL;
    if (!ab) {
        Py_XDECREF(tb);
        goto out;
    }
    Py_BEGIN_ALLOW_THREADS
    gd_dfa_prune_apply(tab.buf, (int32_t)n, nsym, acc.buf, newnum, (int32_t *)PyBytes_AS_STRING(tb),
                       (uint8_t *)PyBytes_AS_STRING(ab));
    Py_END_ALLOW_THREADS
    ret = Py_BuildValue("(iNN)", rc, tb, ab);
out:
    PyMem_RawFree(newnum);
    PyBuffer_Release(&tab);
    PyBuffer_Release(&acc);
    if (has_col) PyBuffer_Release(&col);
    return ret;
}

static PyObject *py_dfa_minimize_table(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *otab, *oacc;
    int nsym, want_live = 0, live = 1;
    double budget;
    if (!PyArg_ParseTuple(args, "OiOd|p", &otab, &nsym, &oacc, &budget, &want_live)) return NULL;
    Py_buffer tab, acc;
    if (get_buf(otab, &tab, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "table", 'i', 4) < 0) return NULL;
    if (get_buf(oacc, &acc, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "accepting", 'B', 1) < 0) {
        PyBuffer_Release(&tab);
        return NULL;
    }
    Py_ssize_t n = acc.shape[0];
    PyObject *ret = NULL;
    int32_t *block = NULL;
    if (nsym <= 0 || n < 1 || n > INT32_MAX || tab.shape[0] != n * nsym) {
        PyErr_Format(PyExc_ValueError, "dfa_minimize_table: table of %zd entries, %zd states, nsym %d",
                     tab.shape[0], n, nsym);
        goto out;
    }
    block = PyMem_RawMalloc(sizeof(int32_t) * (size_t)n);
    if (!block) {
        PyErr_NoMemory();
        goto out;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = want_live ? gd_dfa_minimize_live(tab.buf, (int32_t)n, nsym, acc.buf, budget, block, &live)
                   : gd_dfa_minimize(tab.buf, (int32_t)n, nsym, acc.buf, budget, block);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        dfa_error(rc, "dfa_minimize_table");
        goto out;
    }
    if (rc == n) {
        ret = want_live ? Py_BuildValue("(iOOO)", rc, Py_None, Py_None, live ? Py_True : Py_False)
                        : Py_BuildValue("(iOO)", rc, Py_None, Py_None);
        goto out;
    }
    PyObject *tb = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)rc * nsym * 4);
    PyObject *ab = tb ? PyBytes_FromStringAndSize(NULL, rc) : NULL;
    if (!ab) {
        Py_XDECREF(tb);
        goto out;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = gd_dfa_quotient(tab.buf, (int32_t)n, nsym, acc.buf, block, rc, (int32_t *)PyBytes_AS_STRING(tb),
                         (uint8_t *)PyBytes_AS_STRING(ab));
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        Py_DECREF(tb);
        Py_DECREF(ab);
        dfa_error(rc, "dfa_minimize_table");
        goto out;
    }
    ret = want_live ? Py_BuildValue("(iNNO)", rc, tb, ab, live ? Py_True : Py_False)
                    : Py_BuildValue("(iNN)", rc, tb, ab);
out:
    PyMem_RawFree(block);
    PyBuffer_Release(&tab);
    PyBuffer_Release(&acc);
    return ret;
}

/* y# of a possibly NULL empty buffer */
#define NZ(p) ((p) ? (const char *)(p) : "")

static PyObject *py_nfa_build(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[11], *owant = Py_None;
    int root, n0, s, max_depth, max_nesting, base_len, max_states, max_frames, max_subset = 0, max_dfa = 0;
    Py_ssize_t max_bytes = 0;
    double budget;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOiiiiiiiid|Oiin", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &o[9], &o[10], &root, &n0, &s, &max_depth, &max_nesting, &base_len, &max_states,
                          &max_frames, &budget, &owant, &max_subset, &max_dfa, &max_bytes))
        return NULL;
    Py_buffer want;
    want.buf = NULL;
    if (owant != Py_None) {
        if (get_buf(owant, &want, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, "want", 'B', 1) < 0) return NULL;
    }
    const char *const names[11] = {"code", "lit", "rule_body", "leaf_n", "leaf_eoff", "leaf_src", "leaf_lo",
                                   "leaf_hi", "leaf_tgt", "leaf_aoff", "leaf_acc"};
    const char fmts[11] = {'i', 'B', 'i', 'i', 'q', 'i', 'B', 'B', 'i', 'q', 'i'};
    Py_buffer b[11];
    for (int i = 0; i < 11; i++)
        if (get_buf(o[i], &b[i], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, names[i], fmts[i],
                    fmts[i] == 'B' ? 1 : fmts[i] == 'q' ? 8 : 4) < 0) {
            while (i--) PyBuffer_Release(&b[i]);
            if (want.buf) PyBuffer_Release(&want);
            return NULL;
        }
    PyObject *ret = NULL;
    Py_ssize_t nl = b[3].shape[0];
    if (want.buf && (want.shape[0] != b[2].shape[0] || max_bytes < 0)) {
        PyErr_SetString(PyExc_ValueError, "nfa_build: want must have one entry per rule");
        goto out;
    }
    const int64_t *eo = b[4].buf, *ao = b[9].buf;
    if (b[4].shape[0] != nl + 1 || b[9].shape[0] != nl + 1 || b[6].shape[0] != b[5].shape[0] ||
        b[7].shape[0] != b[5].shape[0] || b[8].shape[0] != b[5].shape[0] || eo[0] != 0 || ao[0] != 0 ||
        eo[nl] != b[5].shape[0] || ao[nl] != b[10].shape[0] || nl > INT32_MAX || b[2].shape[0] > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "nfa_build: leaf arrays of inconsistent lengths");
        goto out;
    }
    gd_nfa_program p = {b[0].buf, (size_t)b[0].shape[0], b[1].buf, (size_t)b[1].shape[0], b[2].buf,
                        (int32_t)b[2].shape[0], (int32_t)nl, b[3].buf, eo, ao, b[5].buf, b[8].buf, b[10].buf,
                        b[6].buf, b[7].buf, max_depth, max_nesting, base_len, max_states, max_frames, budget,
                        NULL, NULL};
    gd_nfa_out r;
    int rc;
    Py_BEGIN_ALLOW_THREADS /* re-entrant (no global state); buffers stay held */
    if (want.buf)
        rc = gd_nfa_build_rule_dfas(&p, want.buf, max_subset, max_dfa, (size_t)max_bytes, root, n0, s, &r);
    else
        rc = gd_nfa_build(&p, root, n0, s, &r);
    Py_END_ALLOW_THREADS
    if (rc == GD_DFA_OK) {
        ret = Py_BuildValue("(iiiy#y#y#y#y#y#y#y#y#)", 0, (int)r.n, (int)r.end, NZ(r.eps_src),
                            (Py_ssize_t)r.n_eps * 4, NZ(r.eps_tgt), (Py_ssize_t)r.n_eps * 4,
                            NZ(r.e_src), (Py_ssize_t)r.n_edges * 4, NZ(r.e_lo),
                            (Py_ssize_t)r.n_edges, NZ(r.e_hi), (Py_ssize_t)r.n_edges,
                            NZ(r.e_tgt), (Py_ssize_t)r.n_edges * 4, NZ(r.sp_src),
                            (Py_ssize_t)r.n_spec * 4, NZ(r.sp_k), (Py_ssize_t)r.n_spec * 4,
                            NZ(r.sp_tgt), (Py_ssize_t)r.n_spec * 4);
        gd_nfa_out_free(&r);
    } else if (rc == GD_DFA_NOMEM) {
        PyErr_NoMemory();
    } else if (rc == GD_DFA_INVALID) {
        PyErr_SetString(PyExc_ValueError, "nfa_build: malformed program");
    } else {
        ret = Py_BuildValue("(iiiii)", rc, (int)r.n, (int)r.err_rule, (int)r.err_rule2, (int)r.err_arg);
    }
out:
    for (int i = 0; i < 11; i++) PyBuffer_Release(&b[i]);
    if (want.buf) PyBuffer_Release(&want);
    return ret;
}

static PyMethodDef methods[] = {
    {"mask_and", py_mask_and, METH_VARARGS, "mask_and(dst, a, b): dst = a & b over uint32 words."},
    {"mask_or", py_mask_or, METH_VARARGS, "mask_or(dst, a, b): dst = a | b over uint32 words."},
    {"mask_count", py_mask_count, METH_VARARGS, "mask_count(mask, n): set bits among the first n."},
    {"mask_digest", py_mask_digest, METH_VARARGS,
     "mask_digest(mask, n, ids_out_u32) -> (hash of the first (n+31)//32 words, set bits among the first n); the "
     "ids of the set bits are written, ascending, when they fit in ids_out."},
    {"mask_index", py_mask_index, METH_NOARGS,
     "mask_index() -> an empty interning index of sparse masks (one per mask table; the caller serialises its use)."},
    {"mask_index_intern", py_mask_index_intern, METH_VARARGS,
     "mask_index_intern(index, hash, ids_u32, count, inverted, new_mid) -> the id of the sparse mask given by its "
     "hash and its first count ids (set bits, or clear bits when inverted); when absent, added as new_mid if "
     "new_mid >= 0, else -1."},
    {"mask_index_expand", py_mask_index_expand, METH_VARARGS,
     "mask_index_expand(index, mid, mask_out_u32, n): mask_out = mask mid over n tokens ((n + 31) // 32 words)."},
    {"mask_index_ids", py_mask_index_ids, METH_VARARGS,
     "mask_index_ids(index, mid, ids_out_u32) -> (count, inverted): the stored ids of mask mid into ids_out."},
    {"mask_index_bytes", py_mask_index_bytes, METH_VARARGS, "mask_index_bytes(index) -> bytes of the stored ids."},
    {"mask_hash", py_mask_hash, METH_VARARGS, "mask_hash(mask) -> 64-bit hash of the uint32 words (interning)."},
    {"mask_equal", py_mask_equal, METH_VARARGS, "mask_equal(a, b) -> True if the uint32 word arrays are equal."},
    {"mask_mark_next", py_mask_mark_next, METH_VARARGS,
     "mask_mark_next(mask_u32, n, next_state_i32, mark_u8) -> count: mark[next_state[i]] = 1 for each set bit i "
     "among the first n (entries outside the mark skipped)."},
    {"mask_to_ids", py_mask_to_ids, METH_VARARGS,
     "mask_to_ids(mask_u32, n, ids_out_i64) -> count: the set bits among the first n, ascending (at most len(ids_out))."},
    {"mask_from_ids", py_mask_from_ids, METH_VARARGS,
     "mask_from_ids(mask_out_u32, ids_u32): mask = the bits of ids (ids past the mask are left out)."},
    {"apply_mask", (PyCFunction)(void (*)(void))py_apply_mask, METH_VARARGS | METH_KEYWORDS,
     "apply_mask(logits, mask, fill=-inf): in place; logits is a 1-D float32 view, any stride. Releases the GIL."},
    {"trie_build", py_trie_build, METH_VARARGS, "trie_build(blob, offsets_u64) -> capsule. Releases the GIL."},
    {"trie_info", py_trie_info, METH_VARARGS, "trie_info(trie) -> (nodes, bytes)."},
    {"trie_walk", py_trie_walk, METH_VARARGS,
     "trie_walk(trie, classes_u8[256], table_i32_or_i16, ncols, state, mask_out_u32, next_state_i32=None, sink=-1, "
     "plain=None) -> allowed count (sink: a state whose row leads to itself; plain: (node_plain_u8, row_off_i32, "
     "pair_cls_u8, pair_next_i16, loop_memo_u8) for whole plain-text subtrees at plain self-loop states; see "
     "gd_walk_opts). Releases the GIL."},
    {"trie_plain_flags", py_trie_plain_flags, METH_VARARGS,
     "trie_plain_flags(trie, char_dfa_i16, out_u8): per trie node, bit p: every token below continues with complete "
     "plain characters from character state p. Releases the GIL."},
    {"char_pairs", py_char_pairs, METH_VARARGS,
     "char_pairs(char_dfa_i16, byte_class_u16, row_off_out_i32, pair_cls_out_u8, pair_next_out_i16) -> number "
     "of pairs: a plain-text profile's character pairs for one grammar's byte classes (sorted)"},
    {"lazy_new", py_lazy_new, METH_VARARGS,
     "lazy_new(n, start, end, eps_src, eps_tgt, e_src, e_lo, e_hi, e_tgt, sp_src, sp_sym, sp_tgt, n_specials, "
     "byte_ok, max_states, max_bytes) -> a lazily determinised automaton (gd_lazy)"},
    {"lazy_info", py_lazy_info, METH_VARARGS, "lazy_info(lazy) -> (n_states, n_expanded, n_classes, nsym, bytes, byte_class)"},
    {"lazy_row", py_lazy_row, METH_VARARGS, "lazy_row(lazy, state, out_i32): the state's row, made if needed"},
    {"lazy_run", py_lazy_run, METH_VARARGS, "lazy_run(lazy, state, data) -> state after the bytes, -1 if none"},
    {"lazy_step", py_lazy_step, METH_VARARGS, "lazy_step(lazy, state, symbol) -> next state, -1 if none"},
    {"lazy_state", py_lazy_state, METH_VARARGS, "lazy_state(lazy, state) -> (accepting, fewest moves to acceptance)"},
    {"lazy_walk", py_lazy_walk, METH_VARARGS,
     "lazy_walk(trie, classes_u8, lazy, state, mask, next_state=None, plain=None) -> allowed tokens"},
    {"lazy_plain_chain", py_lazy_plain_chain, METH_VARARGS,
     "lazy_plain_chain(row_off, pair_cls, pair_next, lazy, state, max_len) -> as plain_chain"},
    {"unit_walk", py_unit_walk, METH_VARARGS, "units started by byte strings walked through a unit's automaton"},
    {"plain_chain", py_plain_chain, METH_VARARGS,
     "plain_chain(row_off_i32, pair_cls_u8, pair_next_i16, table_i32_or_i16, ncols, state, max_len) -> uniform "
     "plain-text steps from state (>= 0), -2 mixed (or longer than max_len), -3 unbounded. Releases the GIL."},
    {"nfa_determinize", py_nfa_determinize, METH_VARARGS,
     "nfa_determinize(eps_off, eps_tgt, mv_off, mv, start, end, nsym, max_states, budget_s, max_bytes=0) -> "
     "(trans_i32_bytes, accepting_u8_bytes). OverflowError past max_states or max_bytes (0: none; the message "
     "names which), TimeoutError past the budget. Releases the GIL."},
    {"nfa_determinize_coo", py_nfa_determinize_coo, METH_VARARGS,
     "nfa_determinize_coo(n, start, end, eps_src, eps_tgt, e_src, e_lo_u8, e_hi_u8, e_tgt, sp_src, sp_sym, sp_tgt, "
     "n_specials, max_states, budget_s, max_bytes=0, minimal=False) -> (byte_class_u16_bytes, n_classes, "
     "trans_i32_bytes, accepting_u8_bytes). Errors as nfa_determinize. minimal=True: the minimal DFA too "
     "(gd_nfa_minimal_coo; see binding.c). Releases the GIL."},
    {"dfa_bfs", py_dfa_bfs, METH_VARARGS,
     "dfa_bfs(table_i32, nsym, col_ok_u8_or_None, node_ok_u8_or_None, reverse, sources_i32, dist_out_i32) -> "
     "states reached (dist_out[s]: distance, -1 unreachable). Releases the GIL."},
    {"dfa_prune", py_dfa_prune, METH_VARARGS,
     "dfa_prune(table_i32, nsym, accepting_u8, col_ok_u8_or_None, out_table_i32, out_accepting_u8) -> states kept "
     "(0: the start state is dead). Releases the GIL."},
    {"dfa_product", py_dfa_product, METH_VARARGS,
     "dfa_product(table_a_i32, nsym_a, accepting_a_u8, table_b_i32, nsym_b, accepting_b_u8, class_a_i32, "
     "class_b_i32, b_start, keep_b_dead, diff, max_states, budget_s) -> (table bytes, accepting bytes)"},
    {"dfa_minimize", py_dfa_minimize, METH_VARARGS,
     "dfa_minimize(table_i32, nsym, accepting_u8, block_out_i32, budget_s) -> number of blocks "
     "(block_out[s]: block of s, numbered by first state). TimeoutError past the budget. Releases the GIL."},
    {"literal_dfa", py_literal_dfa, METH_VARARGS,
     "literal_dfa(blob_u8, offsets_i64) -> (off_i32_bytes, lab_u8_bytes, tgt_i32_bytes, final_u8_bytes): minimal DFA "
     "of the strictly increasing words blob[offsets[i]:offsets[i+1]], states in BFS order. Releases the GIL."},
    {"dfa_trim", py_dfa_trim, METH_VARARGS,
     "dfa_trim(table_i32, nsym, accepting_u8, col_ok_u8_or_None) -> (states kept, table_i32_bytes, accepting_u8_bytes); "
     "the tables are None when none or every state is kept (as dfa_prune). Releases the GIL."},
    {"dfa_minimize_table", py_dfa_minimize_table, METH_VARARGS,
     "dfa_minimize_table(table_i32, nsym, accepting_u8, budget_s, live=False) -> (blocks, table_i32_bytes, "
     "accepting_u8_bytes[, all_live]): the minimal DFA (as dfa_minimize, its block of state s is the row "
     "block[s]); the tables are None when already minimal; with live, whether every state reaches acceptance "
     "(gd_dfa_minimize_live). TimeoutError past the budget. Releases the GIL."},
    {"nfa_build", py_nfa_build, METH_VARARGS,
     "nfa_build(code_i32, lit_u8, rule_body_i32, leaf_n_i32, leaf_eoff_i64, leaf_src_i32, leaf_lo_u8, leaf_hi_u8, "
     "leaf_tgt_i32, leaf_aoff_i64, leaf_acc_i32, root, n0, s, max_depth, max_nesting, base_len, max_states, "
     "max_frames, budget_s, want_u8=None, max_subset=0, max_dfa=0, max_bytes=0) -> (0, n, end, eps_src, eps_tgt, "
     "e_src, e_lo, e_hi, e_tgt, sp_src, sp_k, sp_tgt) as "
     "bytes, or (rc, n, err_rule, err_rule2, err_arg) for a limit, the budget or a fallback (see gd_nfa_build). "
     "Releases the GIL."},
    {"masker_profiles", py_masker_profiles, METH_VARARGS,
     "masker_profiles(trie, n_tokens, profiles) -> capsule: a vocabulary's plain-text profiles for state maskers"},
    {"state_masker", py_state_masker, METH_VARARGS,
     "state_masker(profiles, classes, table, ncols, n_classes, special_ids, accepting, eog_mask, loop_memos) "
     "-> capsule (see gd_state_mask)"},
    {"state_mask", py_state_mask, METH_VARARGS,
     "state_mask(masker, state, mask_out, ids_out) -> (hash, n, inverted): the state's mask and its digest"},
    {"state_mask_intern", py_state_mask_intern, METH_VARARGS,
     "state_mask_intern(masker, state, mask_out, ids_out, index, new_mid) -> (mid, hash, n, inverted): state_mask, "
     "then a sparse mask's id in the index (see mask_index_intern; -1 for a dense mask). Releases the GIL."},
    {"lazy_masker", py_lazy_masker, METH_VARARGS,
     "lazy_masker(profiles, classes_u8, lazy, special_ids_u32, eog_mask_or_None) -> capsule: the state masker of "
     "a lazy automaton (see gd_lazy_state_mask); state_mask_intern takes it, holding the GIL"},
    {"state_run", py_state_run, METH_VARARGS,
     "state_run(masker, state, data) -> the state after the bytes over the masker's table, -1 if rejected"},
    {"pd_new", py_pd_new, METH_VARARGS,
     "pd_new(max_depth, blob, offsets_u64, trans_off_i64, trans_i32, n_cls_i32, state_off_i32, byte_class_u8, "
     "accepting_u8, call_off_i32, call_x_i32, call_t_i32, spec_off_i32, spec_t_i32) -> capsule: a pushdown "
     "grammar's rules (see gd_pd)"},
    {"pd_live", py_pd_live, METH_VARARGS,
     "pd_live(pd, forbidden_u8, live_out_u8): the states completable without the forbidden rules (see "
     "gd_pd_live). Releases the GIL."},
    {"pd_check", py_pd_check, METH_VARARGS,
     "pd_check(pd_masker, stacks_i32, ids_u32, mask_u32, undecided_u32) -> number of undecided ids: the allowed "
     "ids' bits set in mask (see gd_pd_check). Releases the GIL."},
    {"pd_masker", py_pd_masker, METH_VARARGS,
     "pd_masker(pd, exit_id_i32, exit_set_u8, profiles) -> capsule: a pushdown grammar's mask walks (see "
     "gd_pd_masker_new)"},
    {"pd_run", py_pd_run, METH_VARARGS,
     "pd_run(pd_masker, stacks_i32, data, out_i32) -> (rc, n): the configuration after the bytes, its stacks in "
     "out[:n] when rc is 0 (see gd_pd_run). Releases the GIL."},
    {"pd_masker_bytes", py_pd_masker_bytes, METH_O, "pd_masker_bytes(pd_masker) -> bytes of its tables and memos"},
    {"pd_masker_live", py_pd_masker_live, METH_VARARGS,
     "pd_masker_live(pd_masker, sat_u8_or_None, live_out_u8): the liveness of a saturated set, kept by the masker "
     "(see gd_pd_masker_live)"},
    {"pd_frame_mask", py_pd_frame_mask, METH_VARARGS,
     "pd_frame_mask(pd_masker, rule, state, sat_u8_or_None, special_ids_u32, loc_out, cand_out, ids_out) -> (more, hash, n, "
     "inverted): the tokens a top frame consumes itself (loc) and the others that may enter a call or return "
     "(cand; more: not empty), see gd_pd_frame_mask, and loc's digest as state_mask gives it. Releases the GIL."},
    {"impl", py_impl, METH_NOARGS, "Name of the active kernel implementation."},
    {"impl_supported", py_impl_supported, METH_VARARGS, "impl_supported(name) -> bool."},
    {"set_impl", py_set_impl, METH_VARARGS, "set_impl(name): force scalar|sse2|avx2|avx512|neon."},
    {NULL, NULL, 0, NULL},
};

static int native_exec(PyObject *module) {
    state_of(module)->kernels = gd_kernels_for(gd_best_impl()); /* scalar is always supported */
    if (!state_of(module)->kernels) {
        PyErr_SetString(PyExc_RuntimeError, "decoding._native: no kernel implementation runs on this CPU");
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, (void *)native_exec},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "guarded-decoding native kernels.",
                                    sizeof(native_state), methods, slots, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) { return PyModuleDef_Init(&module); }
