"""Standard input pipelines with named echo points, and simulated slow storage."""
