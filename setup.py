# Only the C extension lives here; everything else is in pyproject.toml.
from setuptools import setup

setup(cffi_modules=["csrc/ffibuild.py:ffibuilder"])
