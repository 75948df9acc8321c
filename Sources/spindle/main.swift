import Foundation
import SpindleCLI

// A closed output pipe must not kill a batch half-way: writes fail with EPIPE instead, and are ignored.
signal(SIGPIPE, SIG_IGN)
exit(await SpindleTool.main(SpindleTool.commandLineArguments))
