/* eventckpt.exactcompare: `same(stored, caller, fallback)`, the C-speed core of eventckpt.ops.same.

   Two values are "the same" when they are equal and would be stored the same: exact types all the way
   down (1, 1.0 and True differ; so do a list and a tuple, a str and a str subclass), a float zero's sign
   counts, and every NaN equals every NaN. This file decides that in one pass for what a checkpoint mostly
   holds: exact dict (with exact str keys; a pair of dicts holding them in different orders takes a second,
   key-by-key pass), list, tuple, str, int, float, bool and None. Any other pair of one type (sets,
   decimals, times, objects, subclasses, dicts with other keys) is handed to `fallback(a, b)`, the
   pure-Python definition (eventckpt.ops), which calls back into this one for what it holds.

   Why C: a plain `save()` compares the whole state with the head on every step. Python's `==` needs a
   second pass to tell 1 from 1.0; this does both in one pass, and compares the leaves the head shares
   with the caller (the codec's copy keeps the caller's immutable objects) by identity without reading
   them.

   Safety: `fallback` runs Python code, which may change the containers being compared (and, in the
   key-by-key pass, so may a dict lookup, once a fallback has given the dict a key that is not a str).
   Every container is held (a new reference) while it is walked, and so is each pair the key-by-key pass
   compares; list items are read by index with the length checked each time, and dict entries come from
   PyDict_Next, which reads the dict as it is now. So a mutation can at worst change the answer, never
   touch freed memory. Leaves of exact types are compared here without running Python code, and are not
   even read when the two sides hold the same object. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

enum { DIFFERENT = 0, SAME = 1, FAILED = -1 };

static int same(PyObject *a, PyObject *b, PyObject *fallback);

static int
ask_fallback(PyObject *a, PyObject *b, PyObject *fallback)
{
    Py_INCREF(a);
    Py_INCREF(b);
    PyObject *answer = PyObject_CallFunctionObjArgs(fallback, a, b, NULL);
    Py_DECREF(a);
    Py_DECREF(b);
    if (answer == NULL) {
        return FAILED;
    }
    int truth = PyObject_IsTrue(answer);
    Py_DECREF(answer);
    return truth < 0 ? FAILED : truth;
}

static int
same_text(PyObject *a, PyObject *b)
{
#if PY_VERSION_HEX < 0x030C0000
    /* Before 3.12 a str made by the deprecated PyUnicode_FromUnicode may not have its canonical form yet. */
    if (PyUnicode_READY(a) < 0 || PyUnicode_READY(b) < 0) {
        return FAILED;
    }
#endif
    Py_ssize_t length = PyUnicode_GET_LENGTH(a);
    if (length != PyUnicode_GET_LENGTH(b) || PyUnicode_KIND(a) != PyUnicode_KIND(b)) {
        return DIFFERENT;
    }
    return memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)length * PyUnicode_KIND(a)) == 0;
}

static int
same_float(PyObject *a, PyObject *b)
{
    double x = PyFloat_AS_DOUBLE(a), y = PyFloat_AS_DOUBLE(b);
    if (x != x) {
        return y != y; /* NaN is stored as "nan" whatever its payload */
    }
    return x == y && (x != 0.0 || signbit(x) == signbit(y));
}

static int
exact_text(PyObject *key)
{
    return Py_TYPE(key) == &PyUnicode_Type;
}

/* 1 when each key of `d` is exactly a str (a str enum or subclass is == to its text but stored apart). */
static int
text_keys(PyObject *d)
{
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(d, &pos, &key, &value)) {
        if (!exact_text(key)) {
            return 0;
        }
    }
    return 1;
}

/* Key by key, in the caller's order: the order of a dict's keys is not a value. */
static int
same_dict_by_key(PyObject *a, PyObject *b, PyObject *fallback)
{
    if (!text_keys(a) || !text_keys(b)) {
        return ask_fallback(a, b, fallback); /* NaN keys, 1 == 1.0 keys, str enum keys */
    }
    Py_ssize_t pos = 0;
    PyObject *key, *theirs;
    while (PyDict_Next(b, &pos, &key, &theirs)) {
        /* Held: a fallback for an earlier key may have given `a` a key whose __eq__ the lookup runs. */
        Py_INCREF(key);
        Py_INCREF(theirs);
        PyObject *ours = PyDict_GetItemWithError(a, key);
        int r;
        if (ours == NULL) {
            r = PyErr_Occurred() ? FAILED : DIFFERENT;
        }
        else {
            Py_INCREF(ours);
            r = same(ours, theirs, fallback);
            Py_DECREF(ours);
        }
        Py_DECREF(key);
        Py_DECREF(theirs);
        if (r != SAME) {
            return r;
        }
    }
    return PyDict_GET_SIZE(a) == PyDict_GET_SIZE(b) ? SAME : DIFFERENT;
}

static int
same_dict(PyObject *a, PyObject *b, PyObject *fallback)
{
    if (PyDict_GET_SIZE(a) != PyDict_GET_SIZE(b)) {
        return DIFFERENT;
    }
    /* The common case first: both dicts hold their keys in one order (the head is a copy of what the
       caller saved), so entries pair up as they are stored, with no hash lookups. */
    Py_ssize_t pos_a = 0, pos_b = 0;
    PyObject *key_a, *value_a, *key_b, *value_b;
    while (PyDict_Next(a, &pos_a, &key_a, &value_a)) {
        if (!PyDict_Next(b, &pos_b, &key_b, &value_b)) {
            return DIFFERENT; /* b shrank under a fallback */
        }
        if (!exact_text(key_a) || !exact_text(key_b)) {
            return same_dict_by_key(a, b, fallback);
        }
        int same_key = key_a == key_b ? SAME : same_text(key_a, key_b);
        if (same_key == FAILED) {
            return FAILED;
        }
        if (same_key != SAME) {
            return same_dict_by_key(a, b, fallback); /* another order */
        }
        int r = same(value_a, value_b, fallback);
        if (r != SAME) {
            return r;
        }
    }
    return PyDict_GET_SIZE(a) == PyDict_GET_SIZE(b) ? SAME : DIFFERENT;
}

static int
same_items(PyObject *a, PyObject *b, PyObject *fallback)
{
    int is_list = PyList_CheckExact(a);
    Py_ssize_t n = Py_SIZE(a);
    if (n != Py_SIZE(b)) {
        return DIFFERENT;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (Py_SIZE(a) != n || Py_SIZE(b) != n) {
            return DIFFERENT; /* a fallback changed a list */
        }
        PyObject *x = is_list ? PyList_GET_ITEM(a, i) : PyTuple_GET_ITEM(a, i);
        PyObject *y = is_list ? PyList_GET_ITEM(b, i) : PyTuple_GET_ITEM(b, i);
        if (x == y) {
            continue;
        }
        int r = same(x, y, fallback);
        if (r != SAME) {
            return r;
        }
    }
    return SAME;
}

static int
same(PyObject *a, PyObject *b, PyObject *fallback)
{
    if (a == b) {
        return SAME;
    }
    PyTypeObject *type = Py_TYPE(a);
    if (type != Py_TYPE(b)) {
        return DIFFERENT;
    }
    if (type == &PyUnicode_Type) {
        return same_text(a, b);
    }
    if (type == &PyBool_Type) {
        return DIFFERENT; /* True and False are singletons (and None, met above as the same object) */
    }
    if (type == &PyLong_Type) {
        return PyObject_RichCompareBool(a, b, Py_EQ);
    }
    if (type == &PyFloat_Type) {
        return same_float(a, b);
    }
    if (type == &PyDict_Type || type == &PyList_Type || type == &PyTuple_Type) {
        /* Counted with Python's own frames: a value nested past the recursion limit (or a cycle) raises
           RecursionError, as `==` does, instead of running out of C stack. */
        if (Py_EnterRecursiveCall(" in eventckpt.exactcompare.same")) {
            return FAILED;
        }
        Py_INCREF(a);
        Py_INCREF(b);
        int r = type == &PyDict_Type ? same_dict(a, b, fallback) : same_items(a, b, fallback);
        Py_DECREF(a);
        Py_DECREF(b);
        Py_LeaveRecursiveCall();
        return r;
    }
    return ask_fallback(a, b, fallback);
}

static PyObject *
exactcompare_same(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "same(stored, caller, fallback) takes 3 arguments");
        return NULL;
    }
    int r = same(args[0], args[1], args[2]);
    if (r == FAILED) {
        return NULL;
    }
    return PyBool_FromLong(r);
}

static PyMethodDef methods[] = {
    {"same", (PyCFunction)(void (*)(void))exactcompare_same, METH_FASTCALL,
     "same(stored, caller, fallback) -> bool: equal and stored the same (see eventckpt.ops.same). Values of "
     "different types differ; fallback(a, b) decides pairs of one type other than dict, list, tuple, str, int, "
     "float, bool and None, and dicts whose keys are not all exactly str."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "eventckpt.exactcompare",
    "The C-speed core of eventckpt.ops.same (built when a C compiler is present; ops falls back to Python).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit_exactcompare(void)
{
    return PyModule_Create(&module);
}
