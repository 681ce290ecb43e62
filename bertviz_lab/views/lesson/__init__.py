"""The guided Lesson: its steps in one list (steps.py), each step's question and the numbers it draws."""
