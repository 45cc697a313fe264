"""What one links checkpoint changes in the rows of the sites its spool files link to, as columns:
the links batch makes it in numpy (archiver.links.steps.site_changes) and each links state writes
it (``LinksState.commit``) without a Python object per site beyond its name.

At a million sites a checkpoint, maps and sets of the sites' names (what this replaced) took
seconds to build, merge and sort before the state wrote a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from archiver.queues.sites import owner_hash

if TYPE_CHECKING:
    from numpy.typing import NDArray

# A site's ``dirty`` in a links state: 0 pushed (or, in a checkpoint's changes, only its hops or
# priority may change), 1 its count to push, 2 new URLs as well (wake the site).
MARKED, COUNTED, WOKEN = 0, 1, 2


@dataclass(frozen=True)
class SiteChanges:
    """One entry per site a checkpoint's files link to, the sites distinct and in key order (the
    order the stores' indexes take rows fastest in)."""

    origins: NDArray[np.object_]  # (strings)
    inlinks: NDArray[np.int64]  # distinct linking sites gained
    woken: NDArray[np.bool_]  # whether the site got new URLs
    hops: NDArray[np.int64]  # the lowest hop count a link gave it
    priority: NDArray[np.float64]  # the highest priority a link gave it

    def dirty(self) -> NDArray[np.int64]:
        """Each site's ``dirty`` (WOKEN, COUNTED, or MARKED: only its hops or priority may
        change, and only a site already known is written)."""
        return np.where(self.woken, WOKEN, np.where(self.inlinks > 0, COUNTED, MARKED))

    def rows(self, dirty: NDArray[np.int64], at: NDArray[np.intp] | None = None, *,
             hashed: bool = False) -> list[tuple[object, ...]]:
        """(origin, in-links gained, ``dirty``, hops, priority) of the sites ``at`` (None: all);
        ``hashed``: each with its ``sites.owner_hash`` last."""
        if at is None:
            at = np.arange(len(self.origins))
        origins = self.origins[at].tolist()
        columns = [origins, self.inlinks[at].tolist(), dirty[at].tolist(), self.hops[at].tolist(),
                   self.priority[at].tolist()]
        if hashed:
            columns.append([owner_hash(origin) for origin in origins])
        return list(zip(*columns, strict=True))

    def touched(self) -> int:
        """How many sites gained in-links or new URLs (are not only MARKED)."""
        return int(np.count_nonzero(self.dirty() != MARKED))
