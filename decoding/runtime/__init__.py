"""Runtime: the per-request matcher, budgets, the llama-cpp-python processor and generation drivers."""
