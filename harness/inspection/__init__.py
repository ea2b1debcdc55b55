"""Looking inside a strategy's result: why each transition exists, and a picture of the graph."""
