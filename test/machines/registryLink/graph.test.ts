// Every state and transition of the capacity-registry chart (the cluster registry client's
// lifecycle) is reached by a test generated from the chart itself: `xstate/graph` plans the
// shortest paths over the model's sample events in test/graph/models.ts, and each path is replayed
// on a live actor, which must end in the planned state (value plus the reserved/committed counts,
// capped at "several") having fired the planned transitions.
import { chartSuite } from '../../graph/suite.js';

chartSuite('registryLink');
