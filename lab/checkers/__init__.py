"""The checkers and their vocabulary: a trial's history, the one set of checkers that judge it, the typed
verdict and its only wording. Pure functions of what a trial recorded; they import nothing but the lab's base."""
