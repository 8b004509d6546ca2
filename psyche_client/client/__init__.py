"""The client: a pure state machine that decides each duty, and the daemon that carries it out.

- ``state_machine``: ``ClientStateMachine``, fed states, results and the time, returns actions;
- ``actions``: ``Send``, ``Prepare``, ``Apply``, ``Train``, ``Evaluate``, ``Snapshot``,
  ``Publish``, ``Log``, the actions it returns;
- ``daemon``: ``ClientDaemon``, the shell that runs the actions on a backend, a transport and a
  trainer;
- ``consensus``: ``round_consensus``, which results of a round a quorum of witnesses vouched for;
- ``results``: ``TrainingResult``, a payload with its commitment and signature, and ``merkle_root``;
- ``leaving``: the ``withdraw`` a client sends when SIGINT or SIGTERM asks it to exit, and
  ``RunIsFull``, the refusal of a join by a run at capacity;
- ``dummy_trainer``: ``DummyTrainer``, simulated training for runs without a model.
"""
