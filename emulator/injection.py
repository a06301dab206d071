"""(being written)"""


def apply(config) -> None:
    pass
