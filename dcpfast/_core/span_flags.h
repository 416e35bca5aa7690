/* What a request to the span caches (spans.h) says, shared by the C of the memory core
   (spans.h, numpy_spans.h) and the compiled cores that cimport it (cmemory.pxd): the size
   from which memory is a span, and the flags of a request. */
#ifndef DCPFAST_SPAN_FLAGS_H
#define DCPFAST_SPAN_FLAGS_H

#include <stddef.h>

#define DCP_SPAN_MIN ((size_t)64 << 10)   /* requests from this size up are spans; smaller
                                            ones the allocator's (dcp_take) */

#define DCP_SPAN_TRACED 1      /* tracemalloc sees the span's use (numpy's arrays) */
#define DCP_SPAN_HUGE 2        /* fresh pages asked for as huge pages (a table read at
                                  random) */
#define DCP_SPAN_WORK 4        /* the state engine's working memory: a cache of its own */

#endif
