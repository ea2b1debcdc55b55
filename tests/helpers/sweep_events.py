"""What a sweep reports, in the order it reports it: a progress object for ``run_sweep``."""


class SweepEvents:
    """Records each ``stage`` text and each record's (model, strategy) as the sweep reports
    them; ``on_record`` (where given) is called with each record as it arrives."""

    def __init__(self, on_record=None):
        self.events: list[tuple] = []
        self.on_record = on_record

    def begin(self, total: int) -> None:
        self.events.append(("begin", total))

    def stage(self, text: str) -> None:
        self.events.append(("stage", text))

    def advance(self, record: dict | None = None) -> None:
        if record is not None:
            self.events.append(("record", record["model"], record["strategy"]))
            if self.on_record:
                self.on_record(record)

    def index(self, event: tuple) -> int:
        """Where ``event`` was reported (ValueError when it was not)."""
        return self.events.index(event)
