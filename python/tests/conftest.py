import os
import sys

# The tests' rank functions live in modules here, which spawned ranks import.
sys.path.insert(0, os.path.dirname(__file__))
