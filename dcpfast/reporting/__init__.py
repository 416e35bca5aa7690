"""What happened on the wire: a report of captures or dumps over time, as figures, JSON
and one self-contained page (``dcpfast.report``; docs/report.md).

``api`` holds ``report`` (public as ``dcpfast.report``) and ``Report``; ``inputs`` plans
the inputs into units and reads each into a ``partial`` aggregate (on a thread, or in a
Spark task); ``conversation`` follows one connection (streams, stalls, ``flow`` control,
NOOPs, damage), ``content`` the documents, ``clock`` the times, ``grid`` the bounded
series; ``figures`` makes the JSON object, ``page`` and ``charts`` the page.
"""

from .api import TABLES, Report
from .figures import VERSION
from .inputs import DEFAULT_STALL_SECONDS

__all__ = ["DEFAULT_STALL_SECONDS", "TABLES", "VERSION", "Report"]
