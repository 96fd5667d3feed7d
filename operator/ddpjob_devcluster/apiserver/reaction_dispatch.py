"""kmock's dispatch of a request to its reactions, made linear: the emulator's hot path.

A mixin of `KubeEmulator` (whose attrs fields `_stock`, `_by_action` and `_ordered` it
fills): kmock's own dispatch costs O(request history) per reaction per request, and
tries up to a dozen reactions where one serves.
"""

from __future__ import annotations

from typing import Any, Protocol

import aiohttp.web
from kmock._internal import filtering, rendering


class _Fields(Protocol):
    """The fields the mixin assigns: slots of the attrs class it serves (or of kmock's), which
    the mixin's own empty `__slots__` cannot name; its methods that assign take `self` as this."""

    _payloads: list[Any]
    _requests: list[Any]
    _stock: tuple[int, ...]
    _by_action: dict[Any, Any]
    _ordered: tuple[tuple[int, ...], list[Any]]


class FastDispatch:
    __slots__ = ()
    _payloads: list[Any]
    _requests: list[Any]
    _stock: tuple[int, ...]
    _by_action: dict[Any, Any]
    _ordered: tuple[tuple[int, ...], list[Any]]

    def _index_stock_reactions(self: _Fields) -> None:
        """With only these reactions, a Kubernetes request is served by the one for its
        action (list, watch, get, create, patch, delete): see _candidates."""
        self._stock = tuple(map(id, self._payloads))
        for payload in self._payloads:
            criteria = getattr(payload._source, "criteria", None)
            if isinstance(criteria, filtering.K8sCriteria) and criteria == filtering.K8sCriteria(
                action=criteria.action
            ):
                self._by_action[criteria.action] = payload

    async def _dispatch(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        """kmock's RawHandler._handle, with the "does this reaction see the request" check
        made against the request alone.

        kmock answers `request in reaction._source` by filtering its whole request history
        until it meets this request: O(history) per reaction per request, quadratic over a
        run (260 ms per create after ~1,200 requests, so a benchmark of thousands of objects
        never ends). Membership of one request depends only on that request (the emulator
        and its tests use no history-slicing reactions), so for the synchronous check the
        root's history is swapped for just this request; the full history is kept.
        """
        candidates = self._candidates(request)
        for payload in candidates + [p for p in self._in_order() if all(p is not c for c in candidates)]:
            if self._sees(payload, request) and not payload._disabled.is_set():
                try:
                    return await payload(request)
                except rendering.ReactionMismatchError:  # either mismatch or depletion
                    payload._disabled.set()
                except NotImplementedError:  # matched, but nothing to respond with
                    pass
        raise NotImplementedError("no reaction matches the request")

    def _in_order(self: _Fields) -> list[Any]:
        """The reactions in kmock's order (highest priority first), sorted once per set
        of reactions rather than per request."""
        ids = tuple(map(id, self._payloads))
        if self._ordered[0] != ids:
            priorities = [payload.priorities for payload in self._payloads]
            width = max((len(priority) for priority in priorities), default=0)
            keys = [tuple(-p for p in priority) + (0,) * (width - len(priority)) for priority in priorities]
            order = sorted(range(len(keys)), key=keys.__getitem__)
            self._ordered = (ids, [self._payloads[index] for index in order])
        return self._ordered[1]

    def _candidates(self, request: rendering.Request) -> list[Any]:
        """The reaction to try first. While only the emulator's own reactions exist, a
        request for a resource is answered by its action's (the discovery reactions
        before it match paths of one or two segments under /api or /apis, which name no
        resource): one filter check instead of up to a dozen, which was a third of the
        emulator's time per Pod create. Tests that add reactions get kmock's full order."""
        if request.resource is None or not request.resource.plural or tuple(map(id, self._payloads)) != self._stock:
            return []
        payload = self._by_action.get(request.action)
        return [payload] if payload is not None else []

    def _sees(self: _Fields, payload: Any, request: rendering.Request) -> bool:
        history = self._requests
        self._requests = [request]  # no await in between: no other request can interleave
        try:
            return request in payload._source
        finally:
            self._requests = history
