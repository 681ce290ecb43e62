"""The Why-this-guess page's sections."""
