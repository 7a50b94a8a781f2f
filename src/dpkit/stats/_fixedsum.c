/*
 * One pass over a block of float64 records for dpkit.stats._fixed.fixed_sum.
 *
 * Per record, exactly the float operations of the NumPy path, in the same order:
 *   v = clip(x, lo, hi)   NaN stays NaN, +-inf becomes a bound;
 *   z = v + magic         the one addition that scales and rounds (magic = 1.5 * 2**(52 - k));
 *   acc += bits(z)        unsigned 64-bit, modulo 2**64 (defined wrap-around, as NumPy's sum);
 *   nan |= exponent of z is all ones   the missing-value flag, accumulated without a branch.
 * z is never infinite (v is a finite bound or a finite record, and |v| is far below magic, which
 * is below 2**970), so an all-ones exponent means NaN, exactly when x is NaN. The flag is read
 * from the bits rather than as z != z because gcc vectorises integer shifts, ands and ors but
 * not a reduction of a float comparison.
 * The block's integer is then (acc - m * bits(magic)) read as a signed 64-bit residue, exactly
 * as the NumPy path computes it from its modular sum (the proof is in fixed_sum's docstring).
 *
 * Constant time: the loop has no data-dependent branch and no early exit. The clamps are
 * written as "x < lo ? lo : x" and "v > hi ? hi : v", which keep a NaN (every comparison with
 * it is false) and compile to maxpd/minpd (maxsd/minsd in the scalar tail) on x86-64, which
 * return their second operand, the record, when it is NaN; fmax/fmin would drop a NaN instead.
 * gcc 12 at -O3 on x86-64 compiles the loop to straight-line SSE2 code (maxpd, minpd, addpd,
 * paddq, pand, por; vmaxpd and the like in the AVX2 copy):
 * its only jumps are the loop's counter tests and the choice between the vector loop and the
 * scalar tail, which depend on the block's length and not on a record's value (checked in
 * gcc -S output).
 *
 * Built with -O3 and never with -ffast-math, which would let the compiler assume no NaN (and
 * drop the flag) and reassociate the rounding addition.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <stdint.h>
#include <string.h>

/* The rounding addition must round once, to double: with excess precision (x87 arithmetic on
 * 32-bit x86 without SSE2) v + magic would round twice, first to 64 bits of mantissa, and a tie
 * could go the other way. Such a build fails here, and the optional extension is skipped. */
#if (defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0) \
    || (defined(__i386__) && !defined(__SSE2_MATH__))
#error "dpkit's compiled sum needs double arithmetic without excess precision"
#endif

/* Under -ffast-math or -ffinite-math-only the compiler may assume no NaN: with -ffast-math gcc 12
 * drops the flag below, and a NaN record is summed instead of refused. setup.py passes
 * -fno-fast-math last; any other build with such flags fails here, and the optional extension
 * is skipped. */
#if defined(__FAST_MATH__) || (defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__) \
    || defined(_M_FP_FAST)
#error "dpkit's compiled sum needs NaN semantics (no -ffast-math, no -ffinite-math-only)"
#endif

#define EXPONENT 0x7ff0000000000000ULL
#define ONE_ULP_OF_EXPONENT 0x0010000000000000ULL

/* On x86-64 with GCC or Clang and glibc, one copy of the loop for AVX2 (four doubles a step) and
 * one for plain SSE2, chosen once at load time by the CPU's features (never by the data). */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__GLIBC__) && defined(__linux__)
#define DPKIT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DPKIT_CLONES
#endif

DPKIT_CLONES static uint64_t
block_bits(const double *restrict x, Py_ssize_t m, double lo, double hi, double magic,
           int *nan)
{
    uint64_t acc = 0;
    uint64_t flag = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        double v = x[i];
        v = v < lo ? lo : v;
        v = v > hi ? hi : v;
        double z = v + magic;
        uint64_t bits;
        memcpy(&bits, &z, sizeof bits);
        acc += bits;
        /* Adding one to the exponent field carries into bit 63 exactly when it is all ones. */
        flag |= (bits & EXPONENT) + ONE_ULP_OF_EXPONENT;
    }
    *nan = (int)(flag >> 63);
    return acc;
}

PyDoc_STRVAR(block_sum_doc,
"block_sum(x, start, stop, lo, hi, magic, base) -> (total, nan)\n\n"
"Sum of rint(clip(x[start:stop], lo, hi) * 2**k) for magic = 1.5 * 2**(52 - k) and\n"
"base = bits(magic), as a signed residue of the modular sum of bit patterns; nan is True\n"
"when the block holds a NaN (total is then meaningless). x: a C-contiguous buffer of\n"
"float64. The GIL is released during the pass.");

static PyObject *
block_sum(PyObject *self, PyObject *args)
{
    PyObject *obj;
    Py_ssize_t start, stop;
    double lo, hi, magic;
    unsigned long long base;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnndddK", &obj, &start, &stop, &lo, &hi, &magic, &base)) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return NULL;
    }
    if (view.itemsize != (Py_ssize_t)sizeof(double) || view.format == NULL
        || strcmp(view.format, "d") != 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "block_sum needs a buffer of float64");
        return NULL;
    }
    Py_ssize_t n = view.len / (Py_ssize_t)sizeof(double);
    if (start < 0 || stop < start || stop > n) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_IndexError, "block_sum: block out of range");
        return NULL;
    }
    const double *x = (const double *)view.buf + start;
    Py_ssize_t m = stop - start;
    int nan = 0;
    uint64_t acc;
    Py_BEGIN_ALLOW_THREADS
    acc = block_bits(x, m, lo, hi, magic, &nan);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    /* Modulo 2**64, then the residue in [-2**63, 2**63): the two's-complement reading. */
    uint64_t residue = acc - (uint64_t)m * (uint64_t)base;
    int64_t total;
    memcpy(&total, &residue, sizeof total);
    return Py_BuildValue("(LO)", (long long)total, nan ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"block_sum", block_sum, METH_VARARGS, block_sum_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fixedsum",
    "One-pass exact fixed-point block sums for dpkit.stats._fixed.", -1, methods,
};

PyMODINIT_FUNC
PyInit__fixedsum(void)
{
    return PyModule_Create(&module);
}
