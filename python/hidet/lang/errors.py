"""The error of Hidet Script: a message located at the user's source line."""


class HidetScriptError(Exception):
    """An error in a Hidet Script function, located at ``filename:lineno``."""

    def __init__(self, filename: str, lineno: int, message: str):
        self.filename, self.lineno, self.message = filename, lineno, message
        super().__init__(f'{filename}:{lineno}: {message}')
