"""The webhook route's memory budget: request body bytes held at once, across all connections.

A body cannot be trusted until the last byte is in and its signature checked, so every body
the route holds counts against one budget, from the moment its length is known (or, for a
chunked upload, as each piece arrives) until its answer is sent. A request that does not fit
is refused at once (503 with Retry-After) instead of being buffered.

A quarter of the budget is kept for small bodies: anyone can send large forged bodies, and a
flood of them must not starve the small deliveries that are nearly all of GitHub's traffic.
Everything runs on the event loop's thread, so plain integers need no lock.
"""

from __future__ import annotations

SMALL_BODY = 1024 * 1024  # bytes; at or under this a body may use the reserve


class IntakeBudget:
    """`total` bytes in all, of which `reserve` only for bodies of at most `small` bytes."""

    def __init__(self, total: int, *, reserve: int | None = None, small: int = SMALL_BODY) -> None:
        if total < 1:
            raise ValueError("the intake budget must be at least 1 byte")
        reserve = total // 4 if reserve is None else reserve
        if not 0 <= reserve < total:
            raise ValueError("the reserve for small bodies must be under the whole budget")
        self.total = total
        self.reserve = reserve
        self.small = small
        self.in_use = 0

    @property
    def largest(self) -> int:
        """The largest body that can ever be admitted: all of the budget but the reserve."""
        return self.total - self.reserve

    def take(self, held: int, more: int) -> bool:
        """Add `more` bytes to a request already holding `held`; False (nothing taken) when
        that would pass what its size may use."""
        limit = self.total if held + more <= self.small else self.total - self.reserve
        if self.in_use + more > limit:
            return False
        self.in_use += more
        return True

    def give_back(self, amount: int) -> None:
        self.in_use -= amount

    def reservation(self) -> Reservation:
        return Reservation(self)


class Reservation:
    """What one request holds of the budget; grown as its body arrives, released once."""

    def __init__(self, budget: IntakeBudget) -> None:
        self.budget = budget
        self.held = 0

    def grow_to(self, size: int) -> bool:
        """Hold at least `size` bytes; False when the budget cannot give them."""
        if size <= self.held:
            return True
        if not self.budget.take(self.held, size - self.held):
            return False
        self.held = size
        return True

    def release(self) -> None:
        self.budget.give_back(self.held)
        self.held = 0
