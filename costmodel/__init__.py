"""The GPU cost model: how a node is priced, and how a device's table is fitted.

Pricing: a *query* (:mod:`.queries`) is a node (its signature, :mod:`.signatures`) read and
written in a pair of representations, or a transition; a device's table (:mod:`.table`) prices
it, measured where the device ran that very node, else fitted by its model
(:mod:`.per_operator`, :mod:`.gradient_boosted` over :mod:`.features`, :mod:`.transferred`);
:mod:`.prediction` adds a program's prices up; :mod:`.pricing` is what an optimiser needs of
whatever prices (a table, or the coverage rounds' stand-in); :mod:`.device_limits`, what makes
a layout illegal on the device.

Fitting: :mod:`.measurements` (what a device's runs measured, and their file) and :mod:`.fit`
(the table of them, with the error it is expected to make on models it never saw).

Of ours, it imports only the shared kernel (:mod:`layoutkit`): strategies and the harness
import it, and hand a table to what prices with it.
"""
