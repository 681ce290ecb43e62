"""The Lesson page: the stepper and predict-then-reveal, and how each step draws."""
