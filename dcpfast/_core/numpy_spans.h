/* A numpy data-memory handler over the state engine's span cache (spans.h, DCP_SPAN_WORK);
   the memory core (cmemory.pyx) installs it for the length of a call (``numpy_spans``).

   The state engine works in whole-array passes: hundreds of arrays of a stretch's length
   made and dropped in each call. From the allocator, their pages go back to the system
   when the heap's top is trimmed and are faulted in and zeroed afresh by the next pass,
   which costs about as much system time as the passes' own work. From the span cache, a
   dropped array's pages serve the next array of its size, resident, within the cache's
   bounds (the most in use at once lately, a few seconds). Requests below DCP_SPAN_MIN
   bytes (span_flags.h) go to the allocator as numpy's own handler sends them (dcp_take).

   Every block starts DCP_NP_HEAD bytes into its memory, after a head that says where the
   memory came from: the span's size, or 0 for the allocator, and the bytes asked for.
   numpy reports the arrays to tracemalloc itself; the spans under them are taken as
   traced (DCP_SPAN_TRACED: spans.h counts them apart), so that a measure adding
   tracemalloc's peak to the spans' counts each byte once. */
#ifndef DCPFAST_NUMPY_SPANS_H
#define DCPFAST_NUMPY_SPANS_H

#define NPY_NO_DEPRECATED_API NPY_2_0_API_VERSION
#include <Python.h>
#include <numpy/arrayobject.h>
#include "spans.h"

#define DCP_NP_HEAD 64                    /* keeps the blocks' alignment to 64 bytes */

typedef struct {
    size_t span;                          /* the span's size; 0: from the allocator */
    size_t asked;                         /* the bytes the block was made for */
} dcp_np_head;

static void *dcp_np_make(size_t n)
{
    size_t want = n + DCP_NP_HEAD, got = 0;
    char *at;
    if (want < n)
        return NULL;
    at = dcp_take(want, &got, DCP_SPAN_TRACED | DCP_SPAN_WORK);
    if (at == NULL)
        return NULL;
    ((dcp_np_head *)at)->span = got;
    ((dcp_np_head *)at)->asked = n;
    return at + DCP_NP_HEAD;
}

static void *dcp_np_malloc(void *ctx, size_t n)
{
    (void)ctx;
    return dcp_np_make(n);
}

static void *dcp_np_calloc(void *ctx, size_t count, size_t size)
{
    char *p;
    (void)ctx;
    if (size && count > (size_t)-1 / size)
        return NULL;
    p = (char *)dcp_np_make(count * size);
    if (p != NULL)
        memset(p, 0, count * size);
    return p;
}

static void dcp_np_free(void *ctx, void *p, size_t size)
{
    char *at;
    (void)ctx; (void)size;
    if (p == NULL)
        return;
    at = (char *)p - DCP_NP_HEAD;
    dcp_give(at, ((dcp_np_head *)at)->span, DCP_SPAN_TRACED | DCP_SPAN_WORK);
}

static void *dcp_np_realloc(void *ctx, void *p, size_t n)
{
    dcp_np_head *head;
    char *moved;
    if (p == NULL)
        return dcp_np_make(n);
    head = (dcp_np_head *)((char *)p - DCP_NP_HEAD);
    if (head->span && n + DCP_NP_HEAD <= head->span && n >= head->asked / 2) {
        head->asked = n;                  /* it fits, and no more than half goes unused */
        return p;
    }
    moved = (char *)dcp_np_make(n);
    if (moved == NULL)
        return NULL;
    memcpy(moved, p, n < head->asked ? n : head->asked);
    dcp_np_free(ctx, p, head->asked);
    return moved;
}

static PyDataMem_Handler dcp_np_handler = {
    "dcpfast_spans",
    1,
    {NULL, dcp_np_malloc, dcp_np_calloc, dcp_np_realloc, dcp_np_free},
};

/* The handler as numpy takes it (a new reference), after numpy's C API is loaded;
   NULL with an exception set where it cannot be. */
static PyObject *dcp_np_capsule(void)
{
    if (PyArray_API == NULL && _import_array() < 0)
        return NULL;
    return PyCapsule_New(&dcp_np_handler, "mem_handler", NULL);
}

/* numpy's PyDataMem_SetHandler: makes ``handler`` (NULL: numpy's own) the current
   context's, and returns the one it replaces (a new reference). */
static PyObject *dcp_np_set_handler(PyObject *handler)
{
    return PyDataMem_SetHandler(handler);
}

/* Whether ``handler`` (a handler capsule) is numpy's own or this one: one that someone
   set for their own reasons is left in place. */
static int dcp_np_replaceable(PyObject *handler)
{
    PyDataMem_Handler *h;
    h = (PyDataMem_Handler *)PyCapsule_GetPointer(handler, "mem_handler");
    if (h == NULL) {
        PyErr_Clear();
        return 0;
    }
    return h == &dcp_np_handler || strcmp(h->name, "default_allocator") == 0;
}

#endif
