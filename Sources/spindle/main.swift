import Foundation

let usage = """
  USAGE: spindle <subcommand>

  SUBCOMMANDS:
    demo        Run the tilt-shift pipeline on sample images it makes itself (not yet built).
  """

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "demo":
  print("spindle demo: not yet — the tilt-shift pipeline lands with the TiltShift and CLI issues.")
case nil, "--help", "-h", "help":
  print(usage)
default:
  FileHandle.standardError.write(Data("error: unknown subcommand '\(arguments[0])'\n\n\(usage)\n".utf8))
  exit(2)
}
