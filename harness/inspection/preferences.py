"""``layoutbench preferences``: the rules of one or more cost tables (:mod:`costmodel.preferences`),
as a table a person reads (one table's with what they rest on, several side by side) or JSON."""

from costmodel.preferences import OperatorPreference, pair_label, percent
from costmodel.table import CostTable
from layoutkit import strict_json

OPERATOR_WIDTH = 32  # wider names fold: the rules get the room
LEGEND = ("Priced by each table's fit on its probes (corpus nodes measured in several representations). A saving "
          "is against ExecuTorch's pick for the node alone, the median over the probes concerned; one within the "
          "operator's error (what the table expects to miss on a model it never saw) is no clear preference.")


def render_preferences(tables: dict[str, tuple[CostTable, list[OperatorPreference]]], output_format: str) -> str:
    """Each table's rules (``tables``: by file name): one table's with what they rest on, several side by side."""
    if output_format == "json":
        return strict_json.dumps([{"table": name, "device": table.device, "digest": table.digest,
                            "models": table.corpus.get("models", []), "operators": [r.to_json() for r in rules]}
                           for name, (table, rules) in tables.items()], indent=1)
    from rich.table import Table

    grid = Table(show_lines=True, caption=LEGEND)
    grid.add_column("operator", overflow="fold", max_width=OPERATOR_WIDTH)
    if len(tables) == 1:
        [(name, (table, rules))] = tables.items()
        grid.title = f"{table.device}: {name}, fitted on {len(table.corpus.get('models', []))} models"
        for column in ("ExecuTorch picks", "fastest most often", "rule", "error"):
            grid.add_column(column)
        for rule in rules:
            grid.add_row(rule.operator, pair_label(rule.executorch), rule.fastest_text, rule.rule, percent(rule.error))
    else:
        for name, (table, _) in tables.items():
            grid.add_column(f"{table.device}\n{name}")
        by_table = [{rule.operator: rule for rule in rules} for _, rules in tables.values()]
        for operator in sorted(set().union(*by_table)):
            grid.add_row(operator, *(f"{rules[operator].rule}; error {percent(rules[operator].error)}\nfastest: "
                                     f"{rules[operator].fastest_text}" if operator in rules else "not probed"
                                     for rules in by_table))
    return _text(grid)


def _text(grid) -> str:
    """A rich table as plain text, as wide as the terminal (160 columns where stdout is none)."""
    import shutil

    from rich.console import Console

    console = Console(width=shutil.get_terminal_size((160, 24)).columns, no_color=True, markup=False,
                      highlight=False, emoji=False)
    with console.capture() as capture:
        console.print(grid)
    return capture.get().rstrip()
