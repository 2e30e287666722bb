// Every state and transition of the delivery chart (one render request's answer) is reached by a
// test generated from the chart itself: `xstate/graph` plans the shortest paths over the model's
// sample events in test/graph/models.ts, and each path is replayed on a live actor (a simulated
// clock for the consumer deadline), which must end in the planned state having fired the
// planned transitions.
import { chartSuite } from '../../graph/suite.js';

chartSuite('delivery');
