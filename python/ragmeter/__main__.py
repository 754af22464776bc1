from ragmeter.cli import console

console()
