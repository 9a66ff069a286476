"""The resource planner: predicts every stage's memory, disk and time from the writers' own size specs
(`python -m pixelpipe.plan`). Imports the layers above.
"""
