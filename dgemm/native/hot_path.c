/* dgemm's cached-call path in C: `dgemm.gemm._cached` and `_FastCall.run` without the
 * interpreter's per-operation cost (bench/NOTES.md, "h5").
 *
 * One entry point, `cached_call(kind, a, b, t1, t2, extra) -> (key, out)`, with exactly the
 * contract of the Python `_cached` it replaces (which stays as the fallback and the
 * reference the tests compare against). Every object it consults is read from the Python
 * modules on each call (gemm's memo table, mode checks, settings, torch's current device,
 * launcher's driver), so monkeypatching and `state.reset()` behave as in Python, with two
 * exceptions read one level down: the launch settings come straight from the environment's
 * dict (what `env.launch_settings` reads) and the stream from `loader._raw_stream` (else
 * `loader.current_stream`), not through gemm's aliases of them.
 * Memoised calls whose A scales need a layout copy (no `native` tuple on the fast call) run
 * the Python `_FastCall.run`.
 *
 * The launch writes the stream into the plan's CUlaunchConfig and calls cuLaunchKernelEx
 * through a function pointer that `launcher.entry_points(driver)` hands over (libcuda's own
 * symbol, or a ctypes callback for a stand-in driver), with the GIL released as ctypes does.
 * Plain C against the CPython API only: no torch or CUDA headers. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <stdint.h>
#include <string.h>

typedef int (*launch_fn)(void *config, void *function, void **params, void **extra);
typedef int (*replace_fn)(void *descriptor, void *address);

#define NUM_POINTERS 6
#define PTR_ALIGNMENT 16u

static PyObject *gemm_globals, *loader_globals, *launcher_globals;
static PyObject *environ_data;      /* os.environ's dict of bytes, or NULL */
static PyObject *environ_keys;      /* the launch settings' variable names, in order */
static PyObject *entry_points;      /* launcher.entry_points(driver) -> (launch, replace, keep) */
static PyObject *pointer_kind;      /* launcher.POINTER */
static Py_ssize_t stream_offset;    /* offsetof(CUlaunchConfig, hStream) */

static PyObject *driver_seen;       /* the driver whose entry points are cached below */
static PyObject *driver_keeps;      /* every driver's callbacks, kept: a launch in flight on
                                     * another thread may still be inside an older one */
static launch_fn launch_entry;
static replace_fn replace_entry;

static PyObject *s_shape, *s_data_ptr, *s_native, *s_pointers, *s_matches, *s_run, *s_d_like,
    *s_get;

/* The module globals read per call, by interned name. */
enum { G_FAST_CALLS, G_DISPATCH_MODES, G_FUNCTION_MODE, G_FUNCTORCH,
       G_NUM_SMS, G_FORCED_TILE, G_LAUNCH_SETTINGS, G_CURRENT_DEVICE, G_EMPTY_LIKE,
       G_RAW_STREAM, G_CURRENT_STREAM, G_DRIVER_OBJECT, G_DRIVER_FN, G_COUNT };
static const char *global_names[G_COUNT] = {
    "_fast_calls", "_dispatch_modes", "_function_mode", "_functorch",
    "_num_sms_setting", "_forced_tile_setting", "_launch_settings", "_current_device",
    "_empty_like", "_raw_stream", "current_stream", "_driver", "driver"};
static PyObject *global_keys[G_COUNT];

/* A global of one of the three modules (a new reference: a call may rebind it), or NULL
 * with an exception set. */
static PyObject *global(PyObject *globals, int which) {
    PyObject *found = PyDict_GetItemWithError(globals, global_keys[which]);
    if (found == NULL && !PyErr_Occurred())
        PyErr_Format(PyExc_RuntimeError, "dgemm native hot path: no global %s",
                     global_names[which]);
    Py_XINCREF(found);
    return found;
}

/* Calls a global with no or one argument; a new reference or NULL. */
static PyObject *call_global(PyObject *globals, int which, PyObject *arg) {
    PyObject *fn = global(globals, which);
    if (fn == NULL) return NULL;
    PyObject *result = arg ? PyObject_CallOneArg(fn, arg) : PyObject_CallNoArgs(fn);
    Py_DECREF(fn);
    return result;
}

/* Calls a no-argument global; 1 if the result is true, 0 if false, -1 on error. */
static int call_truth(PyObject *globals, int which) {
    PyObject *result = call_global(globals, which, NULL);
    if (result == NULL) return -1;
    int truth = PyObject_IsTrue(result);
    Py_DECREF(result);
    return truth;
}

static PyObject *call_method0(PyObject *obj, PyObject *name) {
    return PyObject_VectorcallMethod(name, &obj, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* t.data_ptr() as an integer; -1 with an exception set on error. */
static int data_ptr(PyObject *t, uint64_t *out) {
    PyObject *value = call_method0(t, s_data_ptr);
    if (value == NULL) return -1;
    *out = PyLong_AsUnsignedLongLong(value);
    Py_DECREF(value);
    return (*out == (uint64_t)-1 && PyErr_Occurred()) ? -1 : 0;
}

static PyObject *launch_settings(void) {
    if (environ_data == NULL)
        return call_global(gemm_globals, G_LAUNCH_SETTINGS, NULL);
    Py_ssize_t n = PyTuple_GET_SIZE(environ_keys);
    PyObject *values = PyTuple_New(n);
    if (values == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value = PyDict_GetItemWithError(environ_data, PyTuple_GET_ITEM(environ_keys, i));
        if (value == NULL) {
            if (PyErr_Occurred()) { Py_DECREF(values); return NULL; }
            value = Py_None;
        }
        Py_INCREF(value);
        PyTuple_SET_ITEM(values, i, value);
    }
    return values;
}

/* The memo key; NULL with no exception set when the call may not be memoised (a ValueError,
 * AttributeError or TypeError while building it, as in Python), NULL with one on error. */
static PyObject *memo_key(PyObject *kind, PyObject *extra, PyObject *a0, PyObject *b0,
                          PyObject *t1, PyObject *t2) {
    PyObject *items[10] = {NULL};
    PyObject *key = NULL;
    items[0] = kind; Py_INCREF(kind);
    items[1] = extra; Py_INCREF(extra);
    if ((items[2] = PyObject_GetAttr(a0, s_shape)) == NULL) goto fail;
    if ((items[3] = PyObject_GetAttr(b0, s_shape)) == NULL) goto fail;
    items[4] = PyBool_FromLong(t1 == Py_None);
    items[5] = PyBool_FromLong(t2 == Py_None);
    PyObject *setting = global(gemm_globals, G_NUM_SMS);
    if (setting == NULL) goto fail;
    items[6] = call_method0(setting, s_get);
    Py_DECREF(setting);
    if (items[6] == NULL) goto fail;
    setting = global(gemm_globals, G_FORCED_TILE);
    if (setting == NULL) goto fail;
    items[7] = call_method0(setting, s_get);
    Py_DECREF(setting);
    if (items[7] == NULL) goto fail;
    if ((items[8] = launch_settings()) == NULL) goto fail;
    if ((items[9] = PyLong_FromUnsignedLong(PyThread_get_thread_ident())) == NULL) goto fail;
    key = PyTuple_New(10);
    if (key == NULL) goto fail;
    for (int i = 0; i < 10; i++) PyTuple_SET_ITEM(key, i, items[i]);
    return key;
fail:
    for (int i = 0; i < 10; i++) Py_XDECREF(items[i]);
    if (PyErr_ExceptionMatches(PyExc_ValueError) || PyErr_ExceptionMatches(PyExc_AttributeError)
        || PyErr_ExceptionMatches(PyExc_TypeError))
        PyErr_Clear();
    return NULL;
}

/* Points the process's launches at `driver`'s entry points (cached per driver object). */
static int bind_driver(PyObject *driver) {
    if (driver == driver_seen && launch_entry != NULL) return 0;
    PyObject *got = PyObject_CallOneArg(entry_points, driver);
    if (got == NULL) return -1;
    unsigned long long launch, replace;
    PyObject *keep;
    if (!PyArg_ParseTuple(got, "KKO", &launch, &replace, &keep)) { Py_DECREF(got); return -1; }
    if (PyList_Append(driver_keeps, keep) < 0) { Py_DECREF(got); return -1; }
    Py_INCREF(driver);
    Py_XSETREF(driver_seen, driver);
    launch_entry = (launch_fn)(uintptr_t)launch;
    replace_entry = (replace_fn)(uintptr_t)replace;
    Py_DECREF(got);
    return 0;
}

static PyObject *pointer_tuple(const uint64_t *pointers) {
    PyObject *tuple = PyTuple_New(NUM_POINTERS);
    if (tuple == NULL) return NULL;
    for (int i = 0; i < NUM_POINTERS; i++) {
        PyObject *value = PyLong_FromUnsignedLongLong(pointers[i]);
        if (value == NULL) { Py_DECREF(tuple); return NULL; }
        PyTuple_SET_ITEM(tuple, i, value);
    }
    return tuple;
}

/* 1 when `held` (a plan's `pointers`: a tuple, or None) holds pointer i == value. */
static int holds(PyObject *held, int i, uint64_t value) {
    if (!PyTuple_Check(held) || PyTuple_GET_SIZE(held) != NUM_POINTERS) return 0;
    unsigned long long was = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(held, i));
    if (was == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    return was == value;
}

/* `LaunchPlan.run(pointers, stream)`; 0, or -1 with an exception set. */
static int run_plan(PyObject *plan, const uint64_t *pointers, uint64_t stream) {
    PyObject *native = PyObject_GetAttr(plan, s_native);
    if (native == NULL) return -1;
    unsigned long long config, function, params, base;
    PyObject *patches;
    int ok = PyArg_ParseTuple(native, "KKKKO!", &config, &function, &params, &base,
                              &PyTuple_Type, &patches);
    if (!ok) { Py_DECREF(native); return -1; }
    PyObject *driver = global(launcher_globals, G_DRIVER_OBJECT);
    if (driver == NULL) { Py_DECREF(native); return -1; }
    if (driver == Py_None) {           /* `_driver or driver()` */
        Py_DECREF(driver);
        driver = call_global(launcher_globals, G_DRIVER_FN, NULL);
        if (driver == NULL) { Py_DECREF(native); return -1; }
    }
    int bound = bind_driver(driver);
    Py_DECREF(driver);
    if (bound < 0) { Py_DECREF(native); return -1; }

    PyObject *held = PyObject_GetAttr(plan, s_pointers);
    if (held == NULL) { Py_DECREF(native); return -1; }
    int same = 1;
    for (int i = 0; i < NUM_POINTERS && same; i++) same = holds(held, i, pointers[i]);
    if (!same) {
        /* As `LaunchPlan._patch`: nothing valid is held until every moved parameter is
         * rewritten, so a failure half way leaves a plan the next call rewrites in full. */
        if (PyObject_SetAttr(plan, s_pointers, Py_None) < 0) goto fail;
        Py_ssize_t n = PyTuple_GET_SIZE(patches);
        for (Py_ssize_t p = 0; p < n; p++) {
            PyObject *patch = PyTuple_GET_ITEM(patches, p);
            int index;
            PyObject *kind;
            unsigned long long offset;
            if (!PyArg_ParseTuple(patch, "iOK", &index, &kind, &offset)) goto fail;
            if (index < 0 || index >= NUM_POINTERS) {
                PyErr_SetString(PyExc_RuntimeError, "launch plan: patch index out of range");
                goto fail;
            }
            if (holds(held, index, pointers[index])) continue;
            void *at = (void *)(uintptr_t)(base + offset);
            if (kind == pointer_kind) {
                memcpy(at, &pointers[index], sizeof(uint64_t));
            } else {
                int err = replace_entry(at, (void *)(uintptr_t)pointers[index]);
                if (err) {
                    PyObject *r = PyObject_CallMethod(plan, "_replace_failed", "iK", err,
                                                      (unsigned long long)pointers[index]);
                    Py_XDECREF(r);
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_RuntimeError, "cuTensorMapReplaceAddress failed");
                    goto fail;
                }
            }
        }
        PyObject *now = pointer_tuple(pointers);
        if (now == NULL) goto fail;
        int set = PyObject_SetAttr(plan, s_pointers, now);
        Py_DECREF(now);
        if (set < 0) goto fail;
    }
    Py_DECREF(held);
    held = NULL;

    memcpy((char *)(uintptr_t)config + stream_offset, &stream, sizeof(uint64_t));
    int err;
    launch_fn launch = launch_entry;
    Py_BEGIN_ALLOW_THREADS
    err = launch((void *)(uintptr_t)config, (void *)(uintptr_t)function,
                 (void **)(uintptr_t)params, NULL);
    Py_END_ALLOW_THREADS
    Py_DECREF(native);
    if (err) {
        PyObject *r = PyObject_CallMethod(plan, "_launch_failed", "i", err);
        Py_XDECREF(r);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "cuLaunchKernelEx failed");
        return -1;
    }
    return 0;
fail:
    Py_XDECREF(held);
    Py_DECREF(native);
    return -1;
}

/* `_FastCall.run` for a fast call's `native` tuple (matches, index, d_like, sa_mask, plan):
 * 1 launched, 0 not (the full path decides), -1 error. */
static int run_fast(PyObject *native, PyObject *const *tensors, PyObject *layout) {
    PyObject *index = PyTuple_GET_ITEM(native, 1);
    if (index != Py_None) {
        PyObject *device = call_global(gemm_globals, G_CURRENT_DEVICE, NULL);
        if (device == NULL) return -1;
        int same = PyObject_RichCompareBool(device, index, Py_EQ);
        Py_DECREF(device);
        if (same <= 0) return same;
    }
    uint64_t p[NUM_POINTERS] = {0};
    for (int i = 0; i < 5; i++)
        if (data_ptr(tensors[i], &p[i]) < 0) return -1;
    if (layout != Py_None && data_ptr(layout, &p[5]) < 0) return -1;
    unsigned long long sa_mask = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(native, 3));
    if (sa_mask == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    /* A null pointer (a tensor without storage): the full path decides. */
    if ((p[0] | p[2] | p[3] | p[4] | p[5] | (p[1] & sa_mask)) % PTR_ALIGNMENT
        || !(p[0] && p[1] && p[2] && p[3] && p[4]))
        return 0;
    /* loader.current_stream(index), its private binding inlined when present. */
    PyObject *raw = global(loader_globals, G_RAW_STREAM);
    if (raw == NULL) return -1;
    if (raw == Py_None) {
        Py_DECREF(raw);
        if ((raw = global(loader_globals, G_CURRENT_STREAM)) == NULL) return -1;
    }
    PyObject *got = PyObject_CallOneArg(raw, index);
    Py_DECREF(raw);
    if (got == NULL) return -1;
    unsigned long long stream = PyLong_AsUnsignedLongLong(got);
    Py_DECREF(got);
    if (stream == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    return run_plan(PyTuple_GET_ITEM(native, 4), p, stream) < 0 ? -1 : 1;
}

static PyObject *pair(PyObject *key, PyObject *out) {
    return PyTuple_Pack(2, key ? key : Py_None, out ? out : Py_None);
}

static PyObject *cached_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "cached_call takes 6 arguments");
        return NULL;
    }
    PyObject *kind = args[0], *a = args[1], *b = args[2], *t1 = args[3], *t2 = args[4],
             *extra = args[5];
    if (!(PyTuple_CheckExact(a) || PyList_CheckExact(a))
        || !(PyTuple_CheckExact(b) || PyList_CheckExact(b)))
        return pair(NULL, NULL);
    /* (Not torch.compile's tracing: the callers skip this while it traces.) */
    static const int modes[] = {G_DISPATCH_MODES, G_FUNCTION_MODE, G_FUNCTORCH};
    for (int i = 0; i < 3; i++) {
        int on = call_truth(gemm_globals, modes[i]);
        if (on < 0) return NULL;
        if (on) return pair(NULL, NULL);
    }
    if (PySequence_Fast_GET_SIZE(a) != 2 || PySequence_Fast_GET_SIZE(b) != 2)
        return pair(NULL, NULL);
    /* Owned: a list may change under a callback below. */
    PyObject *a0 = PySequence_Fast_GET_ITEM(a, 0), *a1 = PySequence_Fast_GET_ITEM(a, 1),
             *b0 = PySequence_Fast_GET_ITEM(b, 0), *b1 = PySequence_Fast_GET_ITEM(b, 1);
    Py_INCREF(a0); Py_INCREF(a1); Py_INCREF(b0); Py_INCREF(b1);
    PyObject *key = NULL, *found = NULL, *out = NULL, *result = NULL, *table = NULL;

    key = memo_key(kind, extra, a0, b0, t1, t2);
    if (key == NULL) {
        result = PyErr_Occurred() ? NULL : pair(NULL, NULL);
        goto done;
    }
    table = global(gemm_globals, G_FAST_CALLS);
    if (table == NULL) goto done;
    /* Hashing or comparing a caller's value may raise: the three exceptions Python's `try`
     * catches mean "not memoised". */
    found = PyDict_GetItemWithError(table, key);
    if (found == NULL) {
        if (PyErr_Occurred()) {
            if (!(PyErr_ExceptionMatches(PyExc_ValueError)
                  || PyErr_ExceptionMatches(PyExc_AttributeError)
                  || PyErr_ExceptionMatches(PyExc_TypeError)))
                goto done;
            PyErr_Clear();
            Py_CLEAR(key);
        }
        result = pair(key, NULL);
        goto done;
    }
    Py_INCREF(found);
    if (!PyTuple_Check(found)) {
        PyErr_SetString(PyExc_RuntimeError, "dgemm native hot path: a memo entry is no tuple");
        goto done;
    }
    /* _guarded(...): the optional tensors only where given. */
    PyObject *tensors[6] = {a0, a1, b0, b1, NULL, NULL};
    Py_ssize_t count = 4;
    if (t1 != Py_None) tensors[count++] = t1;
    if (t2 != Py_None) tensors[count++] = t2;
    for (Py_ssize_t f = 0; f < PyTuple_GET_SIZE(found); f++) {
        PyObject *fast = PyTuple_GET_ITEM(found, f);
        PyObject *native = PyObject_GetAttr(fast, s_native);
        if (native == NULL) goto done;
        if (native != Py_None && !(PyTuple_CheckExact(native) && PyTuple_GET_SIZE(native) == 5)) {
            Py_DECREF(native);
            PyErr_SetString(PyExc_TypeError, "dgemm native hot path: a fast call's `native` "
                            "must be None or a 5-tuple (matches, index, d_like, sa_mask, plan)");
            goto done;
        }
        PyObject *matches = native != Py_None ? PyTuple_GetItem(native, 0)
                                              : PyObject_GetAttr(fast, s_matches);
        if (matches == NULL) { Py_DECREF(native); goto done; }
        if (native != Py_None) Py_INCREF(matches);          /* GetAttr's is owned already */
        PyObject *verdict = PyObject_Vectorcall(matches, tensors, count, NULL);
        Py_DECREF(matches);
        int match = verdict ? PyObject_IsTrue(verdict) : -1;
        Py_XDECREF(verdict);
        if (match <= 0) {
            Py_DECREF(native);
            if (match < 0) goto done;
            continue;
        }
        if (t1 == Py_None) {
            PyObject *like = native != Py_None ? PyTuple_GetItem(native, 2)
                                               : PyObject_GetAttr(fast, s_d_like);
            if (like == NULL) { Py_DECREF(native); goto done; }
            if (native != Py_None) Py_INCREF(like);
            out = call_global(gemm_globals, G_EMPTY_LIKE, like);
            Py_DECREF(like);
            if (out == NULL) { Py_DECREF(native); goto done; }
        } else {
            out = t1;
            Py_INCREF(out);
        }
        int launched;
        if (native != Py_None) {
            PyObject *call[5] = {a0, a1, b0, b1, out};
            launched = run_fast(native, call, t2);
        } else {
            PyObject *r = PyObject_CallMethodObjArgs(fast, s_run, a0, a1, b0, b1, out, t2, NULL);
            launched = r ? PyObject_IsTrue(r) : -1;
            Py_XDECREF(r);
        }
        Py_DECREF(native);
        if (launched < 0) goto done;
        if (!launched) Py_CLEAR(out);
        result = pair(key, out);
        goto done;
    }
    result = pair(key, NULL);
done:
    Py_XDECREF(out);
    Py_XDECREF(found);
    Py_XDECREF(table);
    Py_XDECREF(key);
    Py_DECREF(a0); Py_DECREF(a1); Py_DECREF(b0); Py_DECREF(b1);
    return result;
}

static PyObject *configure(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"gemm", "loader", "launcher", "environ", "environ_keys",
                            "entry_points", "pointer_kind", "stream_offset", NULL};
    PyObject *gemm, *loader, *launcher, *environ, *keys, *entries, *pkind;
    Py_ssize_t offset;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!O!OO!OOn", names, &PyDict_Type, &gemm,
                                     &PyDict_Type, &loader, &PyDict_Type, &launcher, &environ,
                                     &PyTuple_Type, &keys, &entries, &pkind, &offset))
        return NULL;
    if (environ != Py_None && !PyDict_Check(environ)) {
        PyErr_SetString(PyExc_TypeError, "environ must be a dict or None");
        return NULL;
    }
    if (offset < 0) {
        PyErr_SetString(PyExc_ValueError, "stream_offset must be >= 0");
        return NULL;
    }
    Py_INCREF(gemm); Py_XSETREF(gemm_globals, gemm);
    Py_INCREF(loader); Py_XSETREF(loader_globals, loader);
    Py_INCREF(launcher); Py_XSETREF(launcher_globals, launcher);
    if (environ == Py_None) { Py_CLEAR(environ_data); } else { Py_INCREF(environ); Py_XSETREF(environ_data, environ); }
    Py_INCREF(keys); Py_XSETREF(environ_keys, keys);
    Py_INCREF(entries); Py_XSETREF(entry_points, entries);
    Py_INCREF(pkind); Py_XSETREF(pointer_kind, pkind);
    stream_offset = offset;
    Py_CLEAR(driver_seen);
    launch_entry = NULL;
    replace_entry = NULL;
    Py_RETURN_NONE;
}

/* A driver that does nothing, in C, for timing the host path on a GPU-free host
 * (bench/stub_launch.py): launches are counted; re-pointing a descriptor writes the address
 * into its first 8 bytes, where the stub's descriptors keep it, refusing unaligned ones as
 * the driver does (CUDA_ERROR_INVALID_VALUE). */
static unsigned long long null_launch_count, null_replace_count;

static int null_launch(void *config, void *function, void **params, void **extra) {
    (void)config; (void)function; (void)params; (void)extra;
    null_launch_count++;
    return 0;
}

static int null_replace(void *descriptor, void *address) {
    if ((uintptr_t)address % PTR_ALIGNMENT) return 1;
    uint64_t value = (uint64_t)(uintptr_t)address;
    memcpy(descriptor, &value, sizeof(value));
    null_replace_count++;
    return 0;
}

static PyObject *null_driver(PyObject *self, PyObject *unused) {
    return Py_BuildValue("KK", (unsigned long long)(uintptr_t)null_launch,
                         (unsigned long long)(uintptr_t)null_replace);
}

static PyObject *null_counts(PyObject *self, PyObject *unused) {
    return Py_BuildValue("KK", null_launch_count, null_replace_count);
}

static PyMethodDef methods[] = {
    {"null_driver", null_driver, METH_NOARGS,
     "(launch, replace): C addresses of a driver stand-in that only counts."},
    {"null_counts", null_counts, METH_NOARGS, "(launches, replaces) of null_driver's functions."},
    {"cached_call", (PyCFunction)(void (*)(void))cached_call, METH_FASTCALL,
     "cached_call(kind, a, b, t1, t2, extra) -> (key, out): dgemm.gemm._cached in C."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Bind the modules and constants the hot path reads."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "dgemm_hot_path", NULL, -1, methods};

PyMODINIT_FUNC PyInit_dgemm_hot_path(void) {
    struct { PyObject **slot; const char *text; } strings[] = {
        {&s_shape, "shape"}, {&s_data_ptr, "data_ptr"}, {&s_native, "native"},
        {&s_pointers, "pointers"}, {&s_matches, "matches"}, {&s_run, "run"},
        {&s_d_like, "d_like"}, {&s_get, "get"}};
    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++)
        if ((*strings[i].slot = PyUnicode_InternFromString(strings[i].text)) == NULL) return NULL;
    for (int i = 0; i < G_COUNT; i++)
        if ((global_keys[i] = PyUnicode_InternFromString(global_names[i])) == NULL) return NULL;
    if ((driver_keeps = PyList_New(0)) == NULL) return NULL;
    return PyModule_Create(&module);
}
