# Tuple-subclass instances (NamedTuples, ProduceFuture, LogAppendInfo) made the way
# tuple.__new__ makes them, without its argument parsing: allocate, then fill every item.
# Shared by the compiled accelerators (cimported; no module of its own).

from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_SET_ITEM

cdef extern from *:
    """
    /* A tuple subclass instance (a NamedTuple) with n unset items, as tuple.__new__ makes it.
       Only used where the subclass adds no fields and the tuple layout has no hash cache. */
    static PyObject* gregor_alloc_tuple(PyObject* type, Py_ssize_t n) {
        return ((PyTypeObject*)type)->tp_alloc((PyTypeObject*)type, n);
    }
    #if PY_VERSION_HEX < 0x030E0000
    #define GREGOR_TUPLE_ALLOC_OK 1
    #else
    #define GREGOR_TUPLE_ALLOC_OK 0
    #endif
    """
    object gregor_alloc_tuple(object type, Py_ssize_t n)
    int GREGOR_TUPLE_ALLOC_OK


cdef inline bint fast_tuple(object record_type):
    """Whether instances of ``record_type`` (a tuple subclass) can be made by ``tp_alloc``."""
    return (
        GREGOR_TUPLE_ALLOC_OK
        and isinstance(record_type, type)
        and issubclass(record_type, tuple)
        and record_type.__basicsize__ == tuple.__basicsize__
        and record_type.__itemsize__ == tuple.__itemsize__
    )


cdef inline void set_item(object t, Py_ssize_t i, object v):
    Py_INCREF(v)
    PyTuple_SET_ITEM(t, i, v)


cdef inline void replace_item(object t, Py_ssize_t i, object v):
    """Set item ``i`` of a tuple no one else holds: a new one's unset item, or a filled one's
    (whose old item is released)."""
    cdef PyObject* old = PyTuple_GET_ITEM(t, i)
    Py_INCREF(v)
    PyTuple_SET_ITEM(t, i, v)
    Py_XDECREF(old)
