"""``bfs-time``: ``bfs-refined``, then the same local search on predicted GPU time under a
cost table, no solver (docs/gpu-time.md: how it searches, and the numbers)."""

from operator import itemgetter

from strategies._registry import register_strategy
from strategies.assignment import Assignment
from strategies.bfs_refined import BfsRefined, LocalSearch
from strategies.objective import PredictedTime
from strategies.priced_layout import PricedLayout
from strategies.representations import packed_dim_info


class TimeSearch(LocalSearch):
    """:class:`LocalSearch` on predicted time (:class:`~strategies.objective.PredictedTime`): each
    operator node's time in what it reads (its primary argument) and writes (its first output),
    plus each clone's, what the table is unsure of charged as ilp-time charges it against a
    reference assignment, so a node leaves the reference's pair only for a saving the table is
    sure of. Moves, each taken only when it lowers the time:

    - *region moves*, as bfs-refined's: the ones a clone suggests, and each unit to another
      packed dim where the table prices its operators lower or moving it alone saves time;
      each grows through agreeing neighbours, so a run of agnostic ops follows when that pays
      (a preference's move at most ``preference_patience`` units past its best: it is local);
    - *kicks*, once region moves find nothing: a unit next to a clone to another packed dim
      even where that alone costs time, then up to ``repairs`` times the best single move next
      to what moved, kept when the whole saves time. They find what a device's table rarely
      asks for but a rougher one does: neighbours that each want another packed dim, with the
      clones between them placed where they are cheapest.

    After the first round, moves start only next to what the round before changed; the result
    is deterministic and never costs more than the start.
    """

    preference_patience = 8
    repairs = 3  # single moves after a kick
    changed = unkicked = None  # units changed since a round, since kicks (None: all)

    def _other_infos(self, unit) -> list:
        current = packed_dim_info(self.reprs[self.units[unit][0]])
        return [info for info in self.choices[unit] if info != current]

    def _trial(self, unit, info) -> float:
        """The change in time of moving the unit alone, undone."""
        start = len(self.undo_log)
        delta = self._move(unit, info)
        self._undo_to(start)
        return delta

    def _unit_moves(self, units):
        """Each unit to each other packed dim where its operators run faster, or where moving
        it alone saves time (tried only where its operators' gain and the clones next to it,
        all removed, could pay)."""
        min_gain = self.objective.min_gain
        for unit in units:
            members = self.units[unit]
            ops = self._priced_ops(members)
            node_ms = sum(self._node_cost(op, self.reprs) for op in ops)
            clones_ms = sum(self._source_cost(s) for s in self._affected_sources(members))
            for info in self._other_infos(unit):
                choice = self.choices[unit][info]
                moved = {m: choice.get(m, self.reprs[m]) for op in ops for m in self.pairs[op] if m is not None}
                node_gain = node_ms - sum(self._node_cost(op, moved) for op in ops)
                if node_gain > min_gain or (node_gain + clones_ms > min_gain and self._trial(unit, info) < -min_gain):
                    yield [unit], info, self.preference_patience

    def _neighbours(self, unit) -> set:
        """Units whose cost a change of ``unit`` changes: across its clones and its operators."""
        members = self.units[unit]
        found = {self.unit_of[m] for member in members for m in self._linked(member)}
        found.update(self.unit_of[m] for member in members for op in self.priced.get(member, ())
                     for m in self.pairs[op] if m is not None)
        return found - {unit}

    def _near(self, units) -> list:
        """``units`` and their neighbours, in order (every unit for None)."""
        if units is None:
            return list(range(len(self.units)))
        return sorted(set(units).union(*(self._neighbours(u) for u in units)))

    def _keep(self, start: int) -> bool:
        """Note the units the undo log holds changes of since ``start``; whether there are any."""
        moved = {self.unit_of[member] for member, _ in self.undo_log[start:]}
        self.changed.update(moved)
        if self.unkicked is not None:
            self.unkicked.update(moved)
        return bool(moved)

    def _moves(self):
        near = self._near(self.changed)
        self.changed = set()
        every = len(near) == len(self.units)
        for seeds, info in super()._moves():
            if every or not set(near).isdisjoint(seeds):
                yield seeds, info
        yield from self._unit_moves(near)

    def grow(self, seeds: list[int], info, patience: int | None = None) -> bool:
        start = len(self.undo_log)
        super().grow(seeds, info, patience)
        return self._keep(start)

    def kick(self, unit, info) -> bool:
        """Move ``unit`` to ``info`` whatever that costs, then repair next to it; keep the
        whole if it saves time."""
        start = len(self.undo_log)
        delta = self._move(unit, info)
        moved, frontier = {unit}, self._neighbours(unit)
        for _ in range(self.repairs):
            if delta < -self.objective.min_gain:
                break
            trials = [(self._trial(u, i), u, i) for u in sorted(frontier - moved) for i in self._other_infos(u)]
            best = min(trials, key=itemgetter(0), default=None)
            if best is None or best[0] >= -self.objective.min_gain:
                break
            delta += self._move(best[1], best[2])
            moved.add(best[1])
            frontier |= self._neighbours(best[1])
        if delta >= -self.objective.min_gain:
            self._undo_to(start)
        return self._keep(start)

    def _next_to_a_clone(self, unit) -> bool:
        return any(self._source_cost(s) > 0 for s in self._affected_sources(self.units[unit]))

    def run(self, max_rounds: int = 50) -> None:
        """Region moves until none pays, then kicks next to what changed since the last kicks
        (every unit at first); again while a kick pays."""
        for _ in range(max_rounds):
            super().run(max_rounds)
            near, self.unkicked = self._near(self.unkicked), set()
            kicked = [self.kick(unit, info) for unit in near if self._next_to_a_clone(unit)
                      for info in self._other_infos(unit)]
            if not any(kicked):
                return
            self.changed = set(self.unkicked)


@register_strategy("bfs-time")
class BfsTime(PricedLayout, BfsRefined):
    """``bfs-refined``, then :class:`TimeSearch` from its assignment under the cost table it is
    constructed with (``--costs``); the result is kept only where it saves more than the table's
    spread on its anchor, the faster of bfs-downstream's and bfs-refined's assignments
    (ilp-time's rule, :mod:`strategies.objective`). It searches even where the pass inserted no
    clone: a node's representation alone can cost time. Without a table its records are skipped,
    saying how to get one."""

    def settled(self, inserted: frozenset) -> bool:
        return False

    def refine(self, passed: Assignment) -> Assignment:
        plain = PredictedTime(passed.problem, self.table)
        start = super().refine(passed)
        search = TimeSearch(start, plain.relative_to(passed))  # unsure prices charged against ExecuTorch's choices
        search.run()
        found = search.assignment()
        anchor = plain.cheapest([start, passed])  # ties: the start's fewer transitions
        return found if plain.saves_beyond_spread(plain.cost(anchor), plain.cost(found)) else anchor
