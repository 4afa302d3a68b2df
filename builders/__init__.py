"""procvid-corpora: builders of the HowToStep, ShowHowTo, Sieve & Swap and MARC corpora."""

__version__ = "0.1.0"
