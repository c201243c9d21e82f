__version__ = "0.1.0"
USER_AGENT = f"hutch-python/{__version__}"
