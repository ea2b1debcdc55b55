"""From a model name to measured records: the model pipeline, its export cache, and the sweep."""
