import Testing

@testable import SpindleFoundation

@Suite struct AsyncOperationStateMachineTests {
  let here = AsyncOperation.Misuse.Location(file: #fileID, line: 1)

  @Test func startThenFinishWalksReadyExecutingFinished() {
    var machine = AsyncOperationStateMachine()
    #expect(machine.state == .ready)
    #expect(machine.start(isCancelled: false) == .run)
    #expect(machine.state == .ready, "a claimed start is not visible before it is committed")
    machine.commitStart()
    #expect(machine.state == .executing)
    #expect(machine.finish(at: here) == .finish)
    #expect(machine.state == .executing, "a claimed finish is not visible before it is committed")
    machine.commitFinish()
    #expect(machine.state == .finished)
  }

  @Test func cancelledStartFinishesWithoutRunning() {
    var machine = AsyncOperationStateMachine()
    #expect(machine.start(isCancelled: true) == .finishWithoutRunning)
    #expect(machine.state == .ready)
    machine.commitFinish()
    #expect(machine.state == .finished)
  }

  @Test func secondFinishIsAMisuseNamingTheFirst() {
    var machine = AsyncOperationStateMachine()
    _ = machine.start(isCancelled: false)
    machine.commitStart()
    _ = machine.finish(at: here)
    let later = AsyncOperation.Misuse.Location(file: #fileID, line: 2)
    #expect(machine.finish(at: later) == .misuse(.finishedTwice, firstFinish: here), "while finishing")
    machine.commitFinish()
    #expect(machine.finish(at: later) == .misuse(.finishedTwice, firstFinish: here), "once finished")
    #expect(machine.state == .finished)
  }

  @Test func finishBeforeStartAndSecondStartAreMisuses() {
    var machine = AsyncOperationStateMachine()
    #expect(machine.finish(at: here) == .misuse(.finishedBeforeStart, firstFinish: nil))
    #expect(machine.state == .ready)
    _ = machine.start(isCancelled: false)
    #expect(machine.start(isCancelled: false) == .misuse(.startedTwice))
    #expect(machine.finish(at: here) == .misuse(.finishedBeforeStart, firstFinish: nil), "while starting")
  }
}
