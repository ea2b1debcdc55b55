"""Results: the record store and schema, the terminal table, the gate, the report and the dashboard."""
