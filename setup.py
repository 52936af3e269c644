"""The one thing pyproject.toml cannot say in stable setuptools configuration: the optional C extension.

eventckpt.exactcompare is the C-speed core of eventckpt.ops.same (a whole-state save() compares with it).
`optional=True`: on a machine without a C compiler the build goes on, and eventckpt is pure Python.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("eventckpt.exactcompare", ["eventckpt/exactcompare.c"], optional=True)])
