"""``bfs-refined``: ExecuTorch 1.5.1's pass, then a local search that only ever removes clones
(docs/catalog.md: how it searches, and the numbers)."""

import time
from collections import Counter

from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass
from executorch.exir.pass_base import PassResult

from layoutkit.errors import InvalidAssignmentError
from strategies._registry import register_strategy
from strategies.assignment import Assignment
from strategies.layout_problem import (extract, nodes_inserted, remove_transitions, shared_packed_dim_infos,
                                       sync_components)
from strategies.objective import Objective, TransitionCount
from strategies.representations import packed_dim_info


class LocalSearch:
    """Moves *regions* of an assignment to another packed-dim info while that lowers the
    objective's cost (for bfs-refined: removes clones).

    A unit is a sync component (the tensors and uses that must share packed-dim info) or a
    lone tensor or use. Each remaining clone (source, representation read) suggests two
    moves: the source's unit to what is read, or the readers' units to the source's
    representation. A move grows breadth-first from those seeds through the units that
    agreed with a moved one (no clone between them) and accept the target packed dim, so a
    run of layout-agnostic ops changes representation as one instead of paying a clone at
    every step; the prefix of that growth that lowers the cost most is kept. Moves are
    taken only when they lower the cost by more than the objective's ``min_gain``, in a fixed
    order, until none does: the result is deterministic and never worse than the start.
    """

    max_region = 256  # units per move: bounds the search on graphs with long agreeing runs
    patience = 32  # units a move may grow past its best point before it stops

    def __init__(self, start: Assignment, objective: Objective):
        self.problem = problem = start.problem
        self.objective = objective
        self.reprs = {("tensor", key): r for key, r in start.tensors.items()}
        self.reprs.update({("use", i): r for i, r in enumerate(start.uses)})
        grouped = sync_components(problem)
        in_groups = {member for members in grouped for member in members}
        self.units = grouped + [[m] for m in self.reprs if m not in in_groups]
        self.unit_of = {member: u for u, members in enumerate(self.units) for member in members}
        # Per unit: packed-dim info -> the representation each member takes under it.
        self.choices = [self._choices(members) for members in self.units]

        self.uses_of: dict = {key: [] for key in problem.tensors}
        self.reads = {key: Counter() for key in problem.tensors}
        for index, use in enumerate(problem.uses):
            for source in use.sources:
                self.uses_of[source].append(index)
                self.reads[source][start.uses[index]] += 1
        # Per operator the objective prices, the members whose representations price it: its
        # primary use (None where it reads no tensor) and its first output; per member, those operators.
        self.pairs = {op: (None if info.primary_use is None else ("use", info.primary_use),
                           ("tensor", problem.op_outputs[op][0]))
                      for op, info in problem.operators.items() if objective.prices_nodes}
        self.priced: dict = {}
        for op, pair in self.pairs.items():
            for member in filter(None, pair):
                self.priced.setdefault(member, []).append(op)

    def _choices(self, members) -> dict:
        """For each packed-dim info all members offer: the representation each takes (its
        current one where that has the info, else its first with it)."""
        choices = {}
        for info in sorted(shared_packed_dim_infos(self.problem, members),
                           key=lambda i: (i.packed_dim, i.packed_dim_block_size)):
            matching = {m: [r for r in self.problem.domain_of(m) if packed_dim_info(r) == info] for m in members}
            choices[info] = {m: self.reprs[m] if self.reprs[m] in matching[m] else matching[m][0] for m in members}
        return choices

    def assignment(self) -> Assignment:
        return Assignment(self.problem, {key: self.reprs[("tensor", key)] for key in self.problem.tensors},
                          [self.reprs[("use", i)] for i in range(len(self.problem.uses))])

    def _source_cost(self, source) -> float:
        """The cost of the clones of ``source``."""
        own = self.reprs[("tensor", source)]
        cost = self.objective.transition_cost
        return sum(cost(source, own, r) for r, n in self.reads[source].items() if n and r != own)

    def _node_cost(self, op, reprs) -> float:
        """``op``'s cost with its members' representations looked up in ``reprs`` (a dict)."""
        primary, output = self.pairs[op]
        return self.objective.node_cost(op, None if primary is None else reprs[primary], reprs[output])

    def _set(self, member, representation) -> None:
        kind, ref = member
        if kind == "use":
            for source in self.problem.uses[ref].sources:
                self.reads[source][self.reprs[member]] -= 1
                self.reads[source][representation] += 1
        self.reprs[member] = representation

    def _affected_sources(self, members) -> list:
        """The tensors whose clones a change of ``members`` can change, each once, sorted (a
        cost summed over them rounds alike whatever the hash seed)."""
        return sorted({source for kind, ref in members
                       for source in ([ref] if kind == "tensor" else self.problem.uses[ref].sources)})

    def _priced_ops(self, members) -> list:
        """The operators ``members``' representations price, each once, sorted as :meth:`_affected_sources`."""
        return sorted({op for member in members for op in self.priced.get(member, ())})

    def _cost(self, sources: list, ops: list) -> float:
        """The cost of the clones of ``sources`` and of the nodes ``ops``."""
        return sum(map(self._source_cost, sources)) + sum(self._node_cost(op, self.reprs) for op in ops)

    def _move(self, unit, info) -> float:
        """Move one unit to ``info``; returns the change in the cost."""
        changes = [(m, r) for m, r in self.choices[unit][info].items() if self.reprs[m] != r]
        members = [member for member, _ in changes]
        scope = self._affected_sources(members), self._priced_ops(members)  # what the change can change
        before = self._cost(*scope)
        for member, r in changes:
            self.undo_log.append((member, self.reprs[member]))
            self._set(member, r)
        return self._cost(*scope) - before

    def _undo_to(self, length: int) -> None:
        while len(self.undo_log) > length:
            self._set(*self.undo_log.pop())

    def _linked(self, member) -> list:
        """The members a tensor -> use edge joins ``member`` to: a tensor's uses, a use's sources."""
        kind, ref = member
        if kind == "tensor":
            return [("use", index) for index in self.uses_of[ref]]
        return [("tensor", source) for source in self.problem.uses[ref].sources]

    def _agreeing_neighbours(self, unit):
        """Units joined to ``unit`` by a tensor -> use edge that needs no clone now."""
        for member in self.units[unit]:
            yield from (self.unit_of[m] for m in self._linked(member) if self.reprs[m] == self.reprs[member])

    def grow(self, seeds: list[int], info, patience: int | None = None) -> bool:
        """Move ``seeds`` to ``info``, then, breadth-first, each unit that agreed with a moved
        one and accepts ``info``; keep the prefix of that order that lowers the cost most (none
        if none lowers it)."""
        patience = self.patience if patience is None else patience
        start = len(self.undo_log)
        region, queue = set(seeds), list(seeds)
        delta, best, best_length, best_step = 0, 0, start, 0
        for step, unit in enumerate(queue):
            if step >= self.max_region or step - best_step > patience:
                break
            followers = list(self._agreeing_neighbours(unit))
            delta += self._move(unit, info)
            if delta < best - self.objective.min_gain:
                best, best_length, best_step = delta, len(self.undo_log), step
            for follower in followers:
                if follower not in region and info in self.choices[follower]:
                    region.add(follower)
                    queue.append(follower)
        self._undo_to(best_length)
        return best < 0

    def _moves(self):
        """For each transition (source, representation read): move the source's side to
        what is read or the readers' side to the source's representation."""
        for source, reads in self.reads.items():
            own = self.reprs[("tensor", source)]
            for r, count in sorted(reads.items(), key=lambda item: (item[0][0].value, item[0][1].value)):
                if not count or r == own:
                    continue
                source_unit = self.unit_of[("tensor", source)]
                readers = sorted({self.unit_of[("use", i)] for i in self.uses_of[source]
                                  if self.reprs[("use", i)] == r})
                yield [source_unit], packed_dim_info(r)
                yield readers, packed_dim_info(own)

    def run(self, max_rounds: int = 50) -> None:
        self.undo_log = []
        for _ in range(max_rounds):
            improved = False
            for seeds, info, *patience in list(self._moves()):  # a move may set its own patience
                if all(info in self.choices[u] for u in seeds):
                    improved |= self.grow(seeds, info, *patience)
            if not improved:
                return


@register_strategy("bfs-refined")
class BfsRefined(TagMemoryMetaPass):
    """The pinned pass (``bfs-downstream``), then :class:`LocalSearch` over its result.

    Fixes the residual-stream flip-flop of the 1.5.1 pass: an agnostic op (``view_copy``,
    ``add``) whose downstream BFS reaches a channels-packed consumer first is tagged
    channels-packed although its producer and most of its readers are width-packed, so
    the stream pays a clone in and a clone out. Moving that op, or the whole agreeing
    run of agnostic ops around it, back to its neighbours' packed dim removes both
    clones at the price of at most one. When the search finds nothing, the graph is
    exactly what the pass produced; otherwise the pass's clones are removed and the
    refined assignment is applied with the pass's own transition insertion.
    """

    def call(self, graph_module):
        inserted = nodes_inserted(super().call, graph_module)
        self.bfs_transitions = self.transitions = len(inserted)
        self.refine_seconds = 0.0  # reading the problem off the graph, and the search
        if self.settled(inserted):
            return PassResult(graph_module, True)

        start = time.perf_counter()
        passed = Assignment.read(extract(self, graph_module, inserted), graph_module)
        if len(passed.transitions) != len(inserted):
            raise InvalidAssignmentError(f"bfs-refined read {len(passed.transitions)} transitions off the pass's "
                                         f"result, which inserted {len(inserted)}")
        refined = self.refine(passed)
        self.refine_seconds = time.perf_counter() - start
        self.transitions = len(refined.transitions)
        if refined != passed:  # the search moves only to lower its cost
            remove_transitions(graph_module, inserted)
            refined.apply(self, graph_module)
        return PassResult(graph_module, True)

    def settled(self, inserted: frozenset) -> bool:
        """Whether the pass's result stands without a search: with no clone, none to remove."""
        return not inserted

    def refine(self, passed: Assignment) -> Assignment:
        """The pass's assignment after :class:`LocalSearch` on the number of transitions."""
        search = LocalSearch(passed, TransitionCount(passed.problem))
        search.run()
        return search.assignment()

    @classmethod
    def summarize(cls, passes) -> dict:
        return {"bfs_transitions": sum(p.bfs_transitions for p in passes),
                "refine_seconds": sum(p.refine_seconds for p in passes)}

