"""Every exercise, in the README's reading order: chapter 1, then 2, then 4, then 5, then 6."""
from tinyattn_tools.exercises import chapter1, chapter2, chapter4, chapter5, chapter6

EXERCISES = (chapter1.EXERCISES + chapter2.EXERCISES + chapter4.EXERCISES + chapter5.EXERCISES
             + chapter6.EXERCISES)
BY_NAME = {exercise.name: exercise for exercise in EXERCISES}
