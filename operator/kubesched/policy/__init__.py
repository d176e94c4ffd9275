"""SchedulerPolicies: compiling a legacy Policy into an algorithm, the state machine of the custom
resources, the controller that keeps them in force, shadow policies. Imports the layers below."""
