/* The span cache's functions (spans.h) as the cores that borrow it call them: cscan hands
   this table on as a capsule (``cscan.span_api``), and the state core keeps its key
   index's tables in spans through it. */
#ifndef DCPFAST_SPAN_API_H
#define DCPFAST_SPAN_API_H

#include <stddef.h>

#define DCP_SPAN_MIN ((size_t)64 << 10)   /* requests from this size up are spans; smaller
                                            ones the allocator's */

#define DCP_SPAN_TRACED 1      /* tracemalloc sees the span's use (numpy's arrays) */
#define DCP_SPAN_HUGE 2        /* fresh pages asked for as huge pages (a table read at
                                  random) */
#define DCP_SPAN_WORK 4        /* the state engine's working memory: a cache of its own */

typedef struct {
    char *(*take)(size_t n, size_t *got, int flags);
    char *(*grow)(char *at, size_t size, size_t keep, size_t n, size_t *got, int flags);
    void (*give)(char *at, size_t size, int flags);
} dcp_span_api;

#endif
